import os
import pickle

from torch.utils.data import DataLoader

from labkit.core.shared_log import SharedLog


class _Logs:
    def __init__(self, log):
        self.log = log

    def __len__(self):
        return 12

    def __getitem__(self, i):
        self.log.append({"index": i, "pid": os.getpid()})
        return i


def test_records_from_every_worker_land_in_one_log():
    log = SharedLog()
    list(DataLoader(_Logs(log), batch_size=2, num_workers=2))
    records = log.records()
    assert sorted(r["index"] for r in records) == list(range(12))
    assert len({r["pid"] for r in records}) == 2 and os.getpid() not in {r["pid"] for r in records}
    log.clear()
    assert log.records() == []


def test_pickles_as_its_path_and_only_the_owner_deletes_the_file():
    log = SharedLog()
    copy = pickle.loads(pickle.dumps(log))
    copy.append({"a": "line\nwith\tcontrol characters"})
    assert log.records() == [{"a": "line\nwith\tcontrol characters"}]
    del copy
    assert os.path.exists(log.path)
    path = log.path
    del log
    assert not os.path.exists(path)


def test_records_since_a_mark_are_only_the_later_ones():
    log = SharedLog()
    log.append({"n": 1})
    mark = log.mark()
    list(DataLoader(_Logs(log), batch_size=2, num_workers=2))
    assert sorted(r["index"] for r in log.records(since=mark)) == list(range(12))
    assert len(log.records()) == 13
    assert log.records(since=log.mark()) == []


def test_marks_taken_before_a_clear_stay_valid():
    log = SharedLog()
    mark = log.mark()
    log.append({"n": 1})
    log.clear()
    assert log.records() == [] and log.records(since=mark) == []
    for n in range(2, 6):
        log.append({"n": n})
    assert [r["n"] for r in log.records(since=mark)] == [2, 3, 4, 5] == [r["n"] for r in log.records()]
