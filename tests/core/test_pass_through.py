"""One rule for every wrapper of the kit: the wrapped object's attributes reach through, protocols do not, and an
unpickled wrapper never recurses."""

import pickle

import pytest

from labkit.core.pass_through import PassThrough


class Inner:
    batch_size = 4

    def sample_path(self, i):
        return f"class/{i}.jpg"

    def __getitems__(self, indices):  # a protocol the wrapper must not hand out as its own
        return ["inner"] * len(indices)


class Wrapper(PassThrough):
    wraps = "inner"

    def __init__(self, inner):
        self.inner = inner
        self.own = "mine"


def test_what_the_wrapper_lacks_is_the_wrapped_object_s():
    w = Wrapper(Inner())
    assert w.batch_size == 4 and w.sample_path(3) == "class/3.jpg" and w.own == "mine"
    with pytest.raises(AttributeError):
        w.nothing_here  # noqa: B018 (the attribute access is what is tested)


def test_protocol_names_never_pass_through():
    assert not hasattr(Wrapper(Inner()), "__getitems__")


def test_an_unpickled_wrapper_does_not_recurse_before_its_state_is_set():
    blank = Wrapper.__new__(Wrapper)  # what pickle makes before it restores __dict__
    with pytest.raises(AttributeError):
        blank.batch_size  # noqa: B018 (the attribute access is what is tested)
    copy = pickle.loads(pickle.dumps(Wrapper(Inner())))
    assert copy.batch_size == 4 and copy.own == "mine"


def test_every_wrapper_of_the_kit_uses_the_one_rule():
    from labkit.course.pitfalls import SlowAt
    from labkit.datasets.fetch_log import FetchLoggedDataset
    from labkit.samplers.epoch_tagged import EpochTagged
    from labkit.workers.profiled_loader import ProfiledLoader
    from labkit.workers.shared_slots import SlotDataset
    from labkit.workers.stateful_loader import StatefulLoader
    from labkit.workers.watchdog import WatchedLoader

    for wrapper in (
        FetchLoggedDataset,
        EpochTagged,
        ProfiledLoader,
        SlotDataset,
        StatefulLoader,
        WatchedLoader,
        SlowAt,
    ):
        assert issubclass(wrapper, PassThrough) and "__getattr__" not in vars(wrapper), wrapper
