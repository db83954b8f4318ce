"""Input adapters: markdown citations, json, jsonl, yaml, --record."""

from __future__ import annotations

import pytest

from runner.errors import InputError
from runner.inputs import iter_items, iter_records, record_from_pairs
from runner.inputs.markdown_citations import extract_citations

REPORT = """# Findings

## Speech

The First Amendment bars laws "abridging the freedom of speech, or of the press" [constitution.txt:L120-L122](../data/constitution.txt). Courts read it broadly, e.g. in many cases.[cases.txt:L5](cases.txt)

Madison wrote that “the accumulation of all powers, legislative, executive, and judiciary, in the same hands” is tyranny [federalist_47.txt:L30-32](f47) [federalist_47.txt:L33](f47). A second sentence follows without a citation.

- The Tenth Amendment reserves other powers to the states [constitution.txt:L140](x).
- A label may try to escape [../../etc/passwd:L1](p).

The U.S. Senate has two members per state [constitution.txt:L20-L21](c). This sentence ends first.[constitution.txt:L22](c)
"""


def test_citation_extraction_on_a_realistic_report():
    citations = extract_citations(REPORT)
    assert [(c["file"], c["start"], c["end"]) for c in citations] == [
        ("constitution.txt", 120, 122), ("cases.txt", 5, 5), ("federalist_47.txt", 30, 32),
        ("federalist_47.txt", 33, 33), ("constitution.txt", 140, 140), ("../../etc/passwd", 1, 1),
        ("constitution.txt", 20, 21), ("constitution.txt", 22, 22)]
    first, second, madison, madison2, tenth, escape, senate, after = citations
    assert first["quote"] == "abridging the freedom of speech, or of the press"
    assert first["claim"] == 'The First Amendment bars laws "abridging the freedom of speech, or of the press"'
    assert first["target"] == "../data/constitution.txt" and first["index"] == 1
    assert second["claim"] == "Courts read it broadly, e.g. in many cases."        # citation after the full stop
    assert second["quote"] == second["claim"]                                      # no quotes: the claim
    assert madison["quote"] == ("the accumulation of all powers, legislative, executive, and judiciary, "
                                "in the same hands")                              # curly quotes
    assert madison2["claim"] == madison["claim"]                                   # several citations, one sentence
    assert tenth["claim"] == "The Tenth Amendment reserves other powers to the states"
    assert escape["file"] == "../../etc/passwd"                                    # captured, refused later
    assert senate["claim"] == "The U.S. Senate has two members per state"          # abbreviation kept
    assert after["claim"] == "This sentence ends first."
    assert [c["index"] for c in citations] == list(range(1, 9))


def test_citation_pattern_is_configurable():
    text = "Claim here {doc.txt#12} and more."
    citations = extract_citations(text, {"pattern": r"\{(?P<file>[^#]+)#(?P<start>\d+)\}"})
    assert citations[0]["file"] == "doc.txt" and citations[0]["start"] == 12 and citations[0]["end"] == 12
    assert citations[0]["claim"] == "Claim here"


def test_json_jsonl_yaml(tmp_path):
    (tmp_path / "a.json").write_text('{"x": 1}')
    (tmp_path / "b.json").write_text('[{"x": 1}, {"x": 2}]')
    (tmp_path / "c.jsonl").write_text('{"x": 1}\n\n{"x": 2}\n')
    (tmp_path / "d.yaml").write_text("- x: 1\n- x: 2\n")
    (tmp_path / "e.json").write_text('{"x": 1}\n{"x": 2}\n')   # JSONL with a .json name
    assert [r.value for r in iter_records("json", tmp_path / "a.json", {})] == [{"x": 1}]
    for name, adapter in (("b.json", "json"), ("c.jsonl", "jsonl"), ("d.yaml", "yaml"), ("e.json", "json")):
        assert [r.value for r in iter_records(adapter, tmp_path / name, {})] == [{"x": 1}, {"x": 2}]


def test_bad_json_file_is_a_located_input_error(tmp_path):
    (tmp_path / "bad.json").write_text('[{"x": 1},\n {"x": }]')
    with pytest.raises(InputError, match=r"bad.json:2:8: not valid JSON"):
        list(iter_records("json", tmp_path / "bad.json", {}))
    with pytest.raises(InputError, match="input file not found"):
        list(iter_records("json", tmp_path / "none.json", {}))


def test_nan_infinity_and_a_key_given_twice_are_refused_as_the_csv_adapter_refuses_them(tmp_path):
    """Python reads them (NaN as a float every comparison fails, the last of two keys silently):
    a JSON-lines line holding one is that item's error, a JSON file holding one is refused."""
    (tmp_path / "a.jsonl").write_text('{"score": NaN}\n{"score": -Infinity}\n{"s": 1, "s": 2}\n{"score": 0.5}\n')
    found = list(iter_records("jsonl", tmp_path / "a.jsonl", {}))
    assert [r.error for r in found] == [
        f"{tmp_path / 'a.jsonl'}:1: NaN is not a JSON value (write a number, null or a string)",
        f"{tmp_path / 'a.jsonl'}:2: -Infinity is not a JSON value (write a number, null or a string)",
        f"{tmp_path / 'a.jsonl'}:3: the key 's' is given twice in one object (only one value would be read)", None]
    assert found[3].value == {"score": 0.5}
    (tmp_path / "b.json").write_text('[{"x": 1}, {"y": {"z": 1, "z": 1}}]')
    with pytest.raises(InputError, match=r"b.json: the key 'z' is given twice in one object"):
        list(iter_records("json", tmp_path / "b.json", {}))


def test_a_json_lines_file_whose_first_line_holds_a_huge_number_names_that_line(tmp_path):
    """The json adapter read such a file whole, so its message covered the file: the first line
    is that item's error, as the jsonl adapter says it, and the other lines are read."""
    (tmp_path / "big.json").write_text('{"n": ' + "9" * 5000 + '}\n{"x": 2}\n')
    first, second = iter_records("json", tmp_path / "big.json", {})
    assert first.error == f"{tmp_path / 'big.json'}:1: a number of more than 4300 digits, past what runner reads " \
                          "(write it as a string)"
    assert second.value == {"x": 2} and second.error is None


def test_a_json_lines_file_whose_first_line_is_not_utf8_names_that_line(tmp_path):
    """The json adapter read such a file whole and refused all of it: the first line is that
    item's error, as the jsonl adapter says it, and the other lines are read."""
    (tmp_path / "latin.json").write_bytes(b'{"n": "caf\xe9"}\n{"x": 2}\n')
    first, second = iter_records("json", tmp_path / "latin.json", {})
    assert first.error == f"{tmp_path / 'latin.json'}:1:11: not UTF-8 text (byte 0xe9)"
    assert second.value == {"x": 2} and second.error is None


def test_a_json_document_whose_first_line_holds_a_huge_number_is_still_one_document(tmp_path):
    """Only a next line that opens an object makes such a first line JSON lines: a document that
    goes on below it is refused whole, as before."""
    (tmp_path / "doc.json").write_text('{"a": ' + "9" * 5000 + ', "b": {}\n}\n')
    with pytest.raises(InputError, match="a number of more than 4300 digits"):
        list(iter_records("json", tmp_path / "doc.json", {}))


def test_explode_and_record_pairs():
    from runner.inputs import Record
    items = list(iter_items([Record({"slides": [1, 2]}), Record({"slides": [3]})], "slides"))
    assert [(i.index, i.value, i.parent["slides"]) for i in items] == [(1, 1, [1, 2]), (2, 2, [1, 2]), (3, 3, [3])]
    assert record_from_pairs(["start=12", "claim=The sky: blue", "flag=true", "q="]) == \
        {"start": 12, "claim": "The sky: blue", "flag": True, "q": ""}
    with pytest.raises(InputError):
        record_from_pairs(["novalue"])


def test_an_exploded_items_key_covers_its_parent_but_not_its_siblings():
    """Changing one slide of a deck keeps the other slides' keys (their reviews and stored
    verdicts follow them); the deck's other fields, which every slide reads, are in each key."""
    from runner.inputs import Record
    deck = {"session": "s1", "data": [1, 2], "slides": [{"html": "a"}, {"html": "b"}, {"html": "c"}]}
    changed = {**deck, "slides": [{"html": "a"}, {"html": "B!"}, {"html": "c"}]}
    other_data = {**deck, "data": [1, 3]}
    keys = [[i.key for i in iter_items([Record(d)], "slides")] for d in (deck, changed, other_data)]
    assert keys[1][0] == keys[0][0] and keys[1][2] == keys[0][2] and keys[1][1] != keys[0][1]
    assert not set(keys[2]) & set(keys[0])
    assert len(set(keys[0])) == 3


def _sentence_ends_by_each_abbreviation(masked: str, abbreviations: list[str]) -> list[int]:
    """The sentence ends as runner found them before one pattern searched for every
    abbreviation at once: each abbreviation tested in turn."""
    from runner.inputs.markdown_citations import SENTENCE_END
    ends = []
    for match in SENTENCE_END.finditer(masked):
        mark = match.start()
        if any(masked.endswith(a, 0, mark + 1) and (mark + 1 == len(a) or not masked[mark - len(a)].isalnum())
               for a in abbreviations):
            continue
        ends.append(match.end())
    return ends


def test_sentence_ends_skip_exactly_the_abbreviations_a_test_per_abbreviation_skips():
    import random

    from runner.inputs.markdown_citations import DEFAULT_ABBREVIATIONS, sentence_ends
    rng = random.Random(26)
    pieces = ["e.g.", "i.e.", "U.S.", "p.", "pp.", "Dr.", "etc", ".", "!", "?", ".\"", ".)", " ", "\n", "\x00",
              "a", "Z", "7", "_", "é", "ß", "٣", "x.", "(", "-", "vs", "al.", "Co."]
    lists = [DEFAULT_ABBREVIATIONS, [], [""], ["p.", "pp."], ["U.S.", "S."], ["a.b.c."], ["e.g.", ".", "é."]]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        for abbreviations in lists:
            assert sentence_ends(text, abbreviations) == _sentence_ends_by_each_abbreviation(text, abbreviations), \
                (text, abbreviations)


def test_odd_input_that_was_misread_or_a_traceback(tmp_path):
    """(hunt) A citation's 4301-digit line number was a traceback ending the run; a YAML key
    given twice kept the last silently; a pretty-printed JSON object with a trailing comma
    became one errored item per line."""
    report = tmp_path / "r.md"
    report.write_text("Normal [a.txt:L3](a.txt).\n\nHuge [i.txt:L" + "9" * 4301 + "](i.txt).\n\nAfter [b.txt:L4](b.txt).\n")
    cited = list(iter_records("markdown_citations", report, {}))
    assert [c.value.get("start") for c in cited] == [3, None, 4]
    assert cited[1].error == f"{report}:3: a line number of the citation is too large to be a line (4301 digits)"
    twice = tmp_path / "in.yaml"
    twice.write_text("- {text: a, n: 1, n: 2}\n")
    with pytest.raises(InputError, match=r"in.yaml:1:19: not valid YAML: the key 'n' is given twice"):
        iter_records("yaml", twice, {})
    pretty = tmp_path / "t.json"
    pretty.write_text('{\n  "text": "a",\n  "n": 1,\n}\n')
    with pytest.raises(InputError, match=r"t.json:4:1: not valid JSON"):
        list(iter_records("json", pretty, {}))


def test_a_citation_written_another_markdown_way_is_said_never_dropped(tmp_path):
    """(hunt) A link with a title, an <angle> target, a [reference], a lowercase l or a space
    after the colon gave no item and no word, though the adapter promises never silence."""
    report = tmp_path / "odd.md"
    report.write_text('T [d.txt:L4](d.txt "Title").\n\nA [e.txt:L4](<e file.txt>).\n\nR [f.txt:L4][ref].\n\n'
                      "L [g.txt:l4](g.txt).\n\nS [l.txt: L7](l.txt).\n\nF [a.txt:L3](a.txt), not [Figure: L-shaped](x).\n"
                      "\nNor [Note: L2 cache](https://x.com), [Step 1: l1 penalty](y), [Memory: L3][1] or x[i:l1][0].\n")
    records = list(iter_records("markdown_citations", report, {}))
    assert [r.value.get("file") for r in records] == [None] * 5 + ["a.txt"]
    assert all("malformed citation" in r.error for r in records[:5])


def test_an_empty_yaml_file_has_no_item_as_an_empty_json_lines_file(tmp_path):
    """(hunt) It was one item of null, which failed ('None' has no attribute) and exited 3."""
    empty = tmp_path / "in.yaml"
    empty.write_text("\n")
    assert list(iter_records("yaml", empty, {})) == []
