from labkit.course.notebook_files import cell_source, notebook_text, read_notebook


def test_a_notebook_reads_back_as_written_with_its_text_as_the_course_commits_it(tmp_path):
    notebook = {"cells": [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# 标题\n", "text"]}]}
    path = tmp_path / "n.ipynb"
    path.write_text(notebook_text(notebook), encoding="utf-8")
    assert read_notebook(str(path)) == notebook
    assert path.read_text(encoding="utf-8").endswith("}\n") and "标题" in path.read_text(encoding="utf-8")
    assert '\n "cells": [' in path.read_text(encoding="utf-8")  # one space of indent
    assert cell_source(notebook["cells"][0]) == "# 标题\ntext" and cell_source({"source": "one string"}) == "one string"
