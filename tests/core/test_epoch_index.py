"""labkit.core.epoch_index: the epoch travels beside the index; the index a dataset sees is the int it is."""

import json
import pickle
import threading

from labkit.core.epoch_index import EpochBatch, EpochIndex, epoch_of, epoch_scope


def test_an_epoch_index_prints_formats_and_hashes_as_its_int_and_pickles_with_its_epoch():
    i = EpochIndex(5, 3)
    assert i == 5 and [10, 11, 12, 13, 14, 15][i] == 15 and hash(i) == hash(5) and {5: "x"}[i] == "x"
    assert (str(i), repr(i), f"{i}", f"{i:03d}", f"{i}.jpg", json.dumps(i)) == ("5", "5", "5", "005", "5.jpg", "5")
    j = pickle.loads(pickle.dumps(i))
    assert type(j) is EpochIndex and (int(j), j.epoch) == (5, 3)


def test_an_epoch_batch_is_a_list_of_plain_ints():
    batch = EpochBatch((4, 2), epoch=1)
    assert batch == [4, 2] and str(batch) == "[4, 2]" and json.dumps(batch) == "[4, 2]"
    assert all(type(i) is int for i in batch)
    again = pickle.loads(pickle.dumps(batch))
    assert again == [4, 2] and again.epoch == 1


def test_the_epoch_comes_from_the_index_else_the_scope_else_the_default():
    assert epoch_of(7, default=2) == 2 and epoch_of(EpochIndex(7, 9), default=2) == 9
    with epoch_scope(4):
        assert epoch_of(7, default=2) == 4 and epoch_of(EpochIndex(7, 9), default=2) == 9
        with epoch_scope(None):
            assert epoch_of(7, default=2) == 2
        assert epoch_of(7, default=2) == 4
    assert epoch_of(7, default=2) == 2


def test_a_scope_belongs_to_its_thread():
    seen = []
    with epoch_scope(5):
        other = threading.Thread(target=lambda: seen.append(epoch_of(0, default=-1)))
        other.start()
        other.join()
    assert seen == [-1]
