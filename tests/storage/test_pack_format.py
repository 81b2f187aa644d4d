import os
import pickle
import struct
import zlib

import numpy as np
import pytest
from conftest import OUT
from hypothesis import HealthCheck, given, settings

from labkit.decode.pil_decoders import decode_pil
from labkit.storage.pack_format import (
    HEADER_SIZE,
    ChecksumMismatchError,
    CorruptIndexError,
    EntryOutOfBoundsError,
    NotAPackError,
    PackReader,
    PackWriter,
    TruncatedPackError,
    UnsupportedVersionError,
    verify_pack,
)
from labkit.tools import pack_fuzzer
from labkit.tools.pack_fuzzer import SAMPLE_BLOBS as BLOBS
from labkit.tools.pack_fuzzer import SAMPLE_LABELS as LABELS
from labkit.tools.pack_fuzzer import patch, record_offset


def _write(path, alignment=1):
    return pack_fuzzer.write_sample_pack(path, alignment)


@pytest.fixture()
def small_pack(tmp_path):
    return _write(str(tmp_path / "small.pack"))


def test_round_trip_bytes_labels_paths(small_pack):
    r = PackReader(small_pack)
    assert len(r) == 4 and r.kind == "encoded" and r.classes == ["a", "b"]
    assert [r.read(i) for i in range(4)] == BLOBS
    assert r.read_many([3, 0, 2]) == [BLOBS[3], BLOBS[0], BLOBS[2]]
    assert r.labels.tolist() == LABELS
    assert os.fsencode(r.paths[2]) == b"b/caf\xe9.jpg"
    assert "4 encoded samples" in str(verify_pack(small_pack))


def test_alignment_is_honoured(tmp_path):
    r = PackReader(_write(str(tmp_path / "aligned.pack"), alignment=4096))
    assert all(int(o) % 4096 == 0 for o in r.records["offset"])
    assert [r.read(i) for i in range(4)] == BLOBS


def test_reader_maps_lazily_and_pickles_as_its_path(small_pack):
    r = PackReader(small_pack)
    assert not r.mapped  # index read, blobs not mapped until the first read
    r.read(0)
    assert r.mapped
    state = pickle.dumps(r)
    assert len(state) < 300 and b"first sample" not in state
    copy = pickle.loads(state)
    assert not copy.mapped and copy.read(3) == BLOBS[3]


def test_decoded_pack_holds_what_pil_decodes(photos, decoded_pack):
    r = PackReader(decoded_pack)
    assert r.kind == "decoded" and r.decoded_shape == (3, OUT, OUT)
    batch = r.read_decoded([2, 0])
    assert batch.shape == (2, 3, OUT, OUT) and batch.flags.writeable
    first = open(os.path.join(photos, r.paths[0]), "rb").read()
    assert np.array_equal(batch[1], decode_pil(first, OUT).numpy())


def test_interrupted_write_leaves_nothing(tmp_path):
    path = str(tmp_path / "never.pack")
    with pytest.raises(KeyboardInterrupt):
        with PackWriter(path, ["a"]) as w:
            w.add(b"x", 0, "a/x.jpg")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_writer_refuses_bad_samples(tmp_path):
    with PackWriter(str(tmp_path / "p.pack"), ["a"], decoded_shape=(3, 2, 2)) as w:
        with pytest.raises(ValueError, match="x.jpg"):
            w.add(np.zeros((3, 2, 3), np.uint8), 0, "a/x.jpg")
        with pytest.raises(ValueError, match="label 5"):
            w.add(np.zeros((3, 2, 2), np.uint8), 5, "a/y.jpg")


def _write_elsewhere(writer, blobs, start=None):
    """Write ``blobs`` into the writer's file as another process would (aligned, one after another from
    ``start``, by default the writer's `data_end`) and give their records."""
    from labkit.storage.pack_format import RECORD_DTYPE

    offset, records = writer.data_end if start is None else start, []
    fd = os.open(writer.tmp_path, os.O_WRONLY)
    try:
        for blob in blobs:
            offset += -offset % writer.alignment
            os.pwrite(fd, blob, offset)
            records.append((offset, len(blob), 0, zlib.crc32(blob)))
            offset += len(blob)
    finally:
        os.close(fd)
    return np.array(records, dtype=RECORD_DTYPE)


@pytest.mark.parametrize("alignment", [1, 64])
def test_samples_written_by_another_process_and_single_samples_keep_their_order(tmp_path, alignment):
    """`add_written` records bytes another process wrote into the pack; mixed with `add`, the pack is
    the same as one written a sample at a time."""
    from labkit.core.string_table import StringTable

    one_by_one = tmp_path / "one.pack"
    with PackWriter(one_by_one, ["a", "b"], alignment=alignment) as w:
        for blob, label, k in zip(BLOBS, LABELS, range(4)):
            w.add(blob, label, f"x/{k}.jpg")
    mixed = tmp_path / "mixed.pack"
    with PackWriter(mixed, ["a", "b"], alignment=alignment) as w:
        w.add(BLOBS[0], LABELS[0], "x/0.jpg")
        records = _write_elsewhere(w, BLOBS[1:3])
        records["label"] = LABELS[1:3]
        w.add_written(records, StringTable.from_strings(["x/1.jpg", "x/2.jpg"]))
        w.add(BLOBS[3], LABELS[3], "x/3.jpg")
        assert len(w) == 4
    assert mixed.read_bytes() == one_by_one.read_bytes()
    verify_pack(mixed)


def test_samples_written_elsewhere_are_refused_when_they_do_not_fit(tmp_path):
    from labkit.core.string_table import StringTable

    names = StringTable.from_strings(["a/1", "a/2"])
    with PackWriter(tmp_path / "p.pack", ["a"]) as w:
        w.add(b"first", 0, "a/0")
        records = _write_elsewhere(w, [b"abc", b"defg"])
        with pytest.raises(ValueError, match="2 records but 1 paths"):
            w.add_written(records, names.take([0]))
        past = records.copy()
        past["length"][1] = 5
        with pytest.raises(ValueError, match=r"'a/2' is recorded at bytes .* follow one another"):
            w.add_written(past, names)
        over = _write_elsewhere(w, [b"abc", b"defg"], start=w.data_end - 2)  # over the sample `add` wrote
        with pytest.raises(ValueError, match=r"'a/1' is recorded at bytes .* follow one another"):
            w.add_written(over, names)
        wrong = records.copy()
        wrong["label"][0] = 1
        with pytest.raises(ValueError, match="'a/1': label 1 is not one of the 1 classes"):
            w.add_written(wrong, names)
        assert len(w) == 1
    with PackWriter(tmp_path / "d.pack", ["a"], decoded_shape=(3, 1, 1)) as w:
        with pytest.raises(ValueError, match=r"'a/2': 4 bytes, not a uint8 array of \(3, 1, 1\)"):
            w.add_written(_write_elsewhere(w, [b"abc", b"defg"]), names)


def test_wrong_magic(small_pack):
    patch(small_pack, 0, b"NOTAPACK")
    with pytest.raises(NotAPackError, match="not a labkit pack"):
        PackReader(small_pack)


def test_unknown_version(small_pack):
    patch(small_pack, 8, struct.pack("<I", 99))
    with pytest.raises(UnsupportedVersionError, match="version 99"):
        PackReader(small_pack)


@pytest.mark.parametrize("keep", [0, 20, HEADER_SIZE - 1, HEADER_SIZE + 5, -1])
def test_truncated(small_pack, keep):
    size = os.path.getsize(small_pack)
    with open(small_pack, "r+b") as f:
        f.truncate(keep % size)
    with pytest.raises((TruncatedPackError, NotAPackError), match="small.pack"):
        PackReader(small_pack)


def test_index_entry_past_the_end_names_the_sample(small_pack):
    size = os.path.getsize(small_pack)
    patch(small_pack, record_offset(small_pack, 3), struct.pack("<Q", size + 10))
    pack_fuzzer.resign(small_pack)
    with pytest.raises(EntryOutOfBoundsError, match=r"sample 3 \('b/3.jpg'\)"):
        PackReader(small_pack)


def test_unsigned_index_edit_is_caught(small_pack):
    patch(small_pack, record_offset(small_pack, 1) + 16, struct.pack("<i", 1))
    with pytest.raises(CorruptIndexError, match="index checksum"):
        PackReader(small_pack)


def test_checksum_mismatch_names_sample_on_read_and_verify(small_pack):
    offset = int(PackReader(small_pack).records["offset"][3])
    patch(small_pack, offset + 7, b"\x42\x43")
    r = PackReader(small_pack)
    assert r.read(0) == BLOBS[0]
    with pytest.raises(ChecksumMismatchError, match=r"sample 3 \('b/3.jpg'\)"):
        r.read(3)
    with pytest.raises(ChecksumMismatchError) as err:
        verify_pack(small_pack)
    assert err.value.index == 3 and err.value.sample_path == "b/3.jpg"


def test_sample_index_out_of_range(small_pack):
    with pytest.raises(IndexError, match="small.pack"):
        PackReader(small_pack).read(4)


def test_missing_file_says_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="labkit pack"):
        PackReader(tmp_path / "nope.pack")


# -- damaged files: a named PackError or the original bytes, never anything else -------------------------
# The strategies and the promise are shared with the long run, benchmarks/fuzz_pack.py.

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _keeps_promise(tmp_path, mutation):
    pack_fuzzer.check_promise(pack_fuzzer.damaged_copy(str(tmp_path / "fuzz.pack"), mutation))


@FUZZ
@given(pack_fuzzer.truncations())
def test_fuzz_truncation(tmp_path, mutation):
    _keeps_promise(tmp_path, mutation)


@FUZZ
@given(pack_fuzzer.flips())
def test_fuzz_flipped_bytes(tmp_path, mutation):
    _keeps_promise(tmp_path, mutation)


@FUZZ
@given(pack_fuzzer.record_edits())
def test_fuzz_edited_and_resigned_index(tmp_path, mutation):
    _keeps_promise(tmp_path, mutation)


@FUZZ
@given(pack_fuzzer.header_edits())
def test_fuzz_edited_and_resigned_header(tmp_path, mutation):
    _keeps_promise(tmp_path, mutation)


def test_the_promise_check_catches_a_reader_that_breaks_it(tmp_path, monkeypatch):
    path = _write(str(tmp_path / "p.pack"))
    assert pack_fuzzer.check_promise(path) == "read"
    monkeypatch.setattr(PackReader, "read", lambda self, i: b"changed")
    with pytest.raises(pack_fuzzer.BrokenPromise, match="sample 0 came back changed"):
        pack_fuzzer.check_promise(path)
    monkeypatch.setattr(PackReader, "read", lambda self, i: [][i])
    with pytest.raises(pack_fuzzer.BrokenPromise, match="IndexError, not a PackError"):
        pack_fuzzer.check_promise(path)


def test_a_failed_background_sync_fails_the_pack_instead_of_publishing_it(tmp_path, monkeypatch):
    from labkit.storage import pack_format

    def failing_sync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(pack_format, "SYNC_BEHIND", 1)  # every sample starts a background sync
    monkeypatch.setattr(os, "fdatasync", failing_sync)
    w = PackWriter(tmp_path / "p.pack", ["a"])
    w.add(b"sample bytes", 0, "a/0.jpg")
    with pytest.raises(OSError, match=r"p\.pack\.tmp-\d+ to disk failed: Input/output error"):
        w.close()
    assert list(tmp_path.iterdir()) == []


def test_a_folder_given_as_a_pack_names_both_ways_out(tmp_path):
    from labkit.core.errors import LabkitFileNotFoundError
    from labkit.storage.pack_format import PackReader

    with pytest.raises(
        LabkitFileNotFoundError,
        match="is a folder, not a pack file: open an ImageFolder with ImageFolderDataset, or pack it first",
    ):
        PackReader(str(tmp_path))
