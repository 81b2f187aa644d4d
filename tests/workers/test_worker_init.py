import pickle

from labkit.workers.worker_init import WorkerInitChain


class Note:
    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    def __call__(self, worker_id):
        self.calls.append((self.name, worker_id))


def test_steps_run_in_order_and_none_is_skipped():
    calls = []
    chain = WorkerInitChain(Note("kit", calls), None, Note("yours", calls), Note("mark", calls))
    chain(3)
    assert calls == [("kit", 3), ("yours", 3), ("mark", 3)]


def test_a_chain_pickles_for_spawned_workers():
    copy = pickle.loads(pickle.dumps(WorkerInitChain(Note("kit", []), None)))
    assert len(copy.steps) == 1 and copy.steps[0].name == "kit"
