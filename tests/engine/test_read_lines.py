"""read_lines: statuses, context, tagging, never leaving the root, files read once."""

from __future__ import annotations

import os

import pytest

from helpers import run, write_json
from runner.engine.steps.read_lines import FileCache, read_lines


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "canonical"
    folder.mkdir()
    (folder / "doc.txt").write_text("\n".join(f"line {n}" for n in range(1, 21)) + "\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    return folder


def test_reads_cited_lines_with_context(root):
    result = read_lines(FileCache(), root, "doc.txt", 10, 11, 3)
    assert result["status"] == "OK" and result["exists"] is True
    assert result["cited_text"] == "line 10\nline 11"
    assert result["cited_text_tagged"] == "[L10] line 10\n[L11] line 11"
    assert result["context_before"] == "line 7\nline 8\nline 9"
    assert result["context_after"] == "line 12\nline 13\nline 14"
    assert result["context_start"] == 7 and result["total_lines"] == 20 and result["error"] is None


def test_context_is_clipped_at_the_edges(root):
    result = read_lines(FileCache(), root, "doc.txt", 1, 20, 5)
    assert result["context_before"] == "" and result["context_after"] == ""
    assert read_lines(FileCache(), root, "doc.txt", 2, None, 5)["context_before"] == "line 1"


@pytest.mark.parametrize("name,start,end,status", [
    ("../secret.txt", 1, 1, "PATH_OUTSIDE_ROOT"),
    ("sub/../../secret.txt", 1, 1, "PATH_OUTSIDE_ROOT"),
    ("/etc/passwd", 1, 1, "PATH_OUTSIDE_ROOT"),
    ("missing.txt", 1, 1, "FILE_NOT_FOUND"),
    ("doc.txt", 21, 21, "LINES_NOT_FOUND"),
    ("doc.txt", 19, 25, "LINES_NOT_FOUND"),
    ("doc.txt", 5, 4, "LINES_NOT_FOUND"),
    ("doc.txt", 0, 2, "LINES_NOT_FOUND"),
])
def test_statuses(root, name, start, end, status):
    result = read_lines(FileCache(), root, name, start, end, 5)
    assert result["status"] == status and result["exists"] is False
    assert result["cited_text"] == "" and result["error"]


def test_symlink_leaving_the_root_is_refused(root, tmp_path):
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    os.symlink(tmp_path, root / "up")
    cache = FileCache()
    assert read_lines(cache, root, "link.txt", 1, 1, 0)["status"] == "PATH_OUTSIDE_ROOT"
    assert read_lines(cache, root, "up/secret.txt", 1, 1, 0)["status"] == "PATH_OUTSIDE_ROOT"
    assert cache.reads == 0


def test_symlink_inside_the_root_is_fine(root):
    os.symlink(root / "doc.txt", root / "alias.txt")
    assert read_lines(FileCache(), root, "alias.txt", 1, 1, 0)["status"] == "OK"


def test_files_are_read_once_per_run(project, monkeypatch):
    project.file("data/doc.txt", "a\nb\nc\n")
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: src
            uses: read_lines
            with: {root: data, file: "{{ item.file }}", start: "{{ item.line }}", context: 1}
        output: {text: "{{ steps.src.cited_text }}", status: "{{ steps.src.status }}"}
        """)
    reads = []
    original = FileCache.get

    def counting(self, file, encoding):
        if file not in self.lines:
            reads.append(file.name)
        return original(self, file, encoding)

    monkeypatch.setattr(FileCache, "get", counting)
    items = write_json(project.root / "in.json", [{"file": "doc.txt", "line": n} for n in (1, 2, 3, 3)]
                       + [{"file": "../escape.txt", "line": 1}])
    results = run(path, items).results
    assert [r["text"] for r in results] == ["a", "b", "c", "c", ""]
    assert results[-1]["status"] == "PATH_OUTSIDE_ROOT"
    assert reads == ["doc.txt"]
