from labkit.core.wording import clipped, count, first


def test_one_is_singular_everything_else_plural():
    assert count(1, "worker") == "1 worker"
    assert count(0, "worker") == "0 workers"
    assert count(2, "batch", "batches") == "2 batches"
    assert count(1.0, "core") == "1 core" and count(1.5, "core") == "1.5 cores"


def test_a_list_cut_short_says_so_and_how_long_it_was():
    assert first(["a", "b"], 2) == "a, b"
    assert first(range(8), 3) == "0, 1, 2, … (8 in all)"
    assert first([], 4) == ""


def test_a_line_cut_short_ends_in_an_ellipsis_within_its_width():
    assert clipped("short", 8) == "short"
    assert clipped("a longer name", 8) == "a longe…" and len(clipped("a longer name", 8)) == 8


def test_sizes_read_as_a_person_reads_them():
    from labkit.core.wording import size_text

    assert [size_text(n) for n in (0, 512, 3 << 10, 3 << 20, 3 << 30)] == [
        "0 B",
        "512 B",
        "3.0 KiB",
        "3.0 MiB",
        "3.00 GiB",
    ]
