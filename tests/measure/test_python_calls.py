"""labkit.measure.python_calls: Python calls counted in the calling thread and in the threads it starts."""

import threading

from labkit.measure.python_calls import count_python_calls


def _leaf():
    return 1


def _three_in_a_thread():
    def work():
        for _ in range(3):
            _leaf()

    helper = threading.Thread(target=work)
    helper.start()
    helper.join()


def test_calls_are_counted_by_function_in_this_thread_and_those_it_starts():
    counted = count_python_calls(lambda: [_leaf() for _ in range(5)])
    assert counted.by_function[("test_python_calls.py", "_leaf")] == 5
    threaded = count_python_calls(_three_in_a_thread)
    assert threaded.by_function[("test_python_calls.py", "_leaf")] == 3
    assert threaded.by_function[("test_python_calls.py", "work")] == 1
    assert counted.per(5) == counted.total / 5 and counted.top(1)[0] == ("test_python_calls.py:_leaf", 5)


def test_c_functions_are_not_counted():
    counted = count_python_calls(lambda: sorted(range(100), key=abs))
    assert counted.total <= 1  # sorted and abs are C functions: at most the lambda's own frame
