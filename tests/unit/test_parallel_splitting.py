"""A parallel job's delimited input is cut between records, never inside one (issue 63): a quoted field that
holds a line break, a delimiter or a doubled quote stays whole in one mini-batch, and each record is one item.
The cuts are read back with the csv module, whose reading the splitter follows (pandas reads them the same)."""
import csv
import io
from pathlib import Path

from mltrain.parallel.inputs import records_in, source, split


def _write(path: Path, rows, header=("id", "text"), newline="\n") -> Path:
    with open(path, "w", newline="") as f:
        out = csv.writer(f, lineterminator=newline)
        out.writerow(header)
        out.writerows(rows)
    return path


def _read_back(path: Path, batch: dict) -> list:
    table = batch["table"]
    with open(path, "rb") as f:
        f.seek(table["start"])
        body = f.read(table["end"] - table["start"]).decode()
    rows = [r for r in csv.reader(io.StringIO(table["header"] + body, newline="")) if r]
    return rows[1:]  # the header travels with every mini-batch


def _sixty(i: int) -> list:
    # every third row has a two-line quoted field (with a delimiter and a doubled quote in it, too)
    return [str(i), f'row {i}, first line\nsecond line "{i}"' if i % 3 == 0 else f"row {i}"]


def test_a_quoted_field_with_a_line_break_is_never_cut_and_each_record_is_one_item(tmp_path):
    path = _write(tmp_path / "sixty.csv", [_sixty(i) for i in range(60)])
    batches = split(source(str(path), "tabular"), 200, None, tmp_path)
    assert len(batches) > 5  # 200 bytes a mini-batch: cut many times, often beside a two-line record
    assert sum(b["items"] for b in batches) == 60
    seen = []
    for batch in batches:
        rows = _read_back(path, batch)
        assert len(rows) == batch["items"]
        seen += rows
    assert seen == [_sixty(i) for i in range(60)]  # each whole, once, in order
    starts = [b["table"]["start"] for b in batches]
    assert starts == sorted(starts) and all(a["table"]["end"] == b["table"]["start"] for a, b in zip(batches, batches[1:]))


def test_records_are_found_as_the_csv_module_reads_them(tmp_path):
    text = ('"a\nheader",b\r\n'          # a header record of two lines
            '1,"x\r\ny"\r\n'              # CRLF inside and after a quoted field
            '\r\n'                        # a blank line: no row
            '2,"say ""hi""\n, then go"\n'  # doubled quotes, then a line break
            '3,un"quoted\n'               # a quote inside an unquoted field is a character, not a quote
            '4,last')                     # no line end at the end of the file
    path = tmp_path / "odd.csv"
    path.write_bytes(text.encode())
    with open(path, "rb") as f:
        ends = list(records_in(f, ",", "utf-8"))
    raw = text.encode()
    cuts = [raw.index(b) + len(b) for b in (b'header",b\r\n', b'y"\r\n', b'y"\r\n\r\n', b'go"\n', b'quoted\n')]
    assert ends == [(cuts[0], False), (cuts[1], False), (cuts[2], True), (cuts[3], False), (cuts[4], False),
                    (len(raw), False)]
    batches = split(source(str(path), "tabular"), 1, None, tmp_path)
    assert [b["items"] for b in batches] == [1, 1, 1, 1]
    assert [_read_back(path, b) for b in batches] == [[["1", "x\r\ny"]], [["2", 'say "hi"\n, then go']],
                                                      [["3", 'un"quoted']], [["4", "last"]]]
