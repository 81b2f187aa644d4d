from labkit.core.wording import count


def test_one_is_singular_everything_else_plural():
    assert count(1, "worker") == "1 worker"
    assert count(0, "worker") == "0 workers"
    assert count(2, "batch", "batches") == "2 batches"
    assert count(1.0, "core") == "1 core" and count(1.5, "core") == "1.5 cores"
