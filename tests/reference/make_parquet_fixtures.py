#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Small Parquet files written by pyarrow -> tests/fixtures/parquet/ (+ expected.json, the rows as JSON).

Run where pyarrow is installed (no network needed), from the repository root:
    python3 tests/reference/make_parquet_fixtures.py --out tests/fixtures/parquet
Each file covers one combination of what Tandem's reader (engine/data/parquet.cpp) must handle: codecs
(UNCOMPRESSED, SNAPPY, ZSTD, GZIP), data pages v1 and v2, dictionary on/off (RLE_DICTIONARY, and
PLAIN_DICTIONARY with format version 1.0), nulls, several row groups and pages, INT32/INT64/BOOLEAN/FLOAT/
DOUBLE/BYTE_ARRAY, and the Hub's nested chat column messages: list<struct<role, content>>.
expected.json maps each file name to {"rows": [...]} (pyarrow's to_pylist(), floats as Python floats) and
{"meta": ...} (row groups, codec, encodings, page version as pyarrow reports them). tests/test_parquet.cpp
reads every file back and must reproduce every row.
"""
import argparse
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

ALPACA = [
    {"instruction": "Give three tips for staying healthy.", "input": None,
     "output": "1. Eat well.\n2. Exercise.\n3. Sleep."},
    {"instruction": "Translate to French", "input": "Good morning", "output": "Bonjour"},
    {"instruction": "Résume en une phrase.", "input": "Le chat dort. Il fait beau.",
     "output": "Un chat dort au soleil ☀️."},
    {"instruction": "Add the numbers", "input": "2, 3", "output": "5"},
    {"instruction": "Name a colour", "input": "", "output": "Blue"},
    {"instruction": "Translate to French", "input": "Good night", "output": "Bonne nuit"},
    {"instruction": "Say hi", "input": None, "output": "Hi! 你好"},
]

CHAT = [
    {"messages": [{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "What is 2+2?"},
                  {"role": "assistant", "content": "4"}]},
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
                  {"role": "user", "content": "Tell me a joke"},
                  {"role": "assistant", "content": "Why did the chicken cross the road?"}]},
    {"messages": []},
    {"messages": None},
    {"messages": [{"role": "user", "content": None}, {"role": "assistant", "content": "ok"}]},
    {"messages": [None, {"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]},
    {"messages": [{"role": "user", "content": "Ünïcödé ✓"}, {"role": "assistant", "content": "👍"}]},
]

CHAT_TYPE = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))

SHAREGPT = [
    {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}], "id": 1},
    {"conversations": [{"from": "system", "value": "Be kind"}, {"from": "human", "value": "Why?"},
                       {"from": "gpt", "value": "Because."}], "id": 2},
]


def typed_table():
    n = 23
    return pa.table({
        "i32": pa.array([None if k % 5 == 3 else k * 7 - 40 for k in range(n)], pa.int32()),
        "i64": pa.array([None if k % 4 == 1 else (k - 11) * 1234567890123 for k in range(n)], pa.int64()),
        "b": pa.array([None if k % 6 == 5 else k % 3 == 0 for k in range(n)], pa.bool_()),
        "f32": pa.array([None if k % 7 == 2 else k * 0.25 - 1.5 for k in range(n)], pa.float32()),
        "f64": pa.array([None if k % 8 == 0 else k / 3.0 for k in range(n)], pa.float64()),
        "text": pa.array([None if k % 9 == 4 else ("row %d " % k) + "x" * (k % 5) for k in range(n)], pa.string()),
        "req": pa.array(["r%d" % (k % 3) for k in range(n)], pa.string()),
    }, schema=pa.schema([
        ("i32", pa.int32()), ("i64", pa.int64()), ("b", pa.bool_()), ("f32", pa.float32()),
        ("f64", pa.float64()), ("text", pa.string()), pa.field("req", pa.string(), nullable=False)]))


def files():
    alpaca = pa.Table.from_pylist(ALPACA, schema=pa.schema(
        [("instruction", pa.string()), ("input", pa.string()), ("output", pa.string())]))
    chat = pa.Table.from_pylist(CHAT, schema=pa.schema([("messages", CHAT_TYPE)]))
    sharegpt = pa.Table.from_pylist(SHAREGPT, schema=pa.schema(
        [("conversations", pa.list_(pa.struct([("from", pa.string()), ("value", pa.string())]))),
         ("id", pa.int64())]))
    pc = pa.table({"prompt": ["The sky is", "2+2=", "Hello"], "completion": [" blue.", "4", " world"]})
    text = pa.table({"text": ["First document.\nTwo lines.", "Second document.", "Third."]})
    out = {
        # name: (table, write_table kwargs)
        "alpaca_plain_none_v1": (alpaca, dict(compression="NONE", use_dictionary=False, data_page_version="1.0")),
        "alpaca_dict_snappy_v1": (alpaca, dict(compression="SNAPPY", use_dictionary=True, data_page_version="1.0")),
        "alpaca_dict_zstd_v2": (alpaca, dict(compression="ZSTD", use_dictionary=True, data_page_version="2.0")),
        "alpaca_plain_gzip_v2": (alpaca, dict(compression="GZIP", use_dictionary=False, data_page_version="2.0")),
        "alpaca_plaindict_v1format": (alpaca, dict(compression="SNAPPY", use_dictionary=True, version="1.0",
                                                   data_page_version="1.0")),
        "alpaca_rowgroups_snappy": (alpaca, dict(compression="SNAPPY", row_group_size=3)),
        "chat_dict_snappy_v1": (chat, dict(compression="SNAPPY", use_dictionary=True, data_page_version="1.0")),
        "chat_plain_zstd_v2": (chat, dict(compression="ZSTD", use_dictionary=False, data_page_version="2.0")),
        "chat_rowgroups_gzip_v1": (chat, dict(compression="GZIP", row_group_size=2, data_page_version="1.0")),
        "chat_none_v2": (chat, dict(compression="NONE", use_dictionary=True, data_page_version="2.0")),
        "sharegpt_snappy": (sharegpt, dict(compression="SNAPPY")),
        "prompt_completion_zstd": (pc, dict(compression="ZSTD")),
        "text_none": (text, dict(compression="NONE")),
        "types_plain_none_v1": (typed_table(), dict(compression="NONE", use_dictionary=False,
                                                    data_page_version="1.0")),
        "types_dict_snappy_v2": (typed_table(), dict(compression="SNAPPY", use_dictionary=True,
                                                     data_page_version="2.0")),
        # Many small pages and row groups: data_page_size in bytes, write_batch_size in rows.
        "types_pages_zstd_v1": (typed_table(), dict(compression="ZSTD", data_page_size=64, write_batch_size=4,
                                                    row_group_size=10, data_page_version="1.0")),
        "types_pages_gzip_v2": (typed_table(), dict(compression="GZIP", data_page_size=64, write_batch_size=4,
                                                    row_group_size=10, data_page_version="2.0",
                                                    use_dictionary=["text"])),
    }
    return out


def meta_of(path):
    md = pq.ParquetFile(path).metadata
    groups = []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        cols = []
        for c in range(rg.num_columns):
            cc = rg.column(c)
            cols.append({"path": cc.path_in_schema, "codec": cc.compression, "encodings": list(cc.encodings),
                         "has_dictionary_page": cc.has_dictionary_page})
        groups.append({"num_rows": rg.num_rows, "columns": cols})
    return {"num_rows": md.num_rows, "format_version": md.format_version, "row_groups": groups}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/parquet")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    expected = {"pyarrow": pa.__version__}
    for name, (table, kw) in files().items():
        path = os.path.join(args.out, name + ".parquet")
        pq.write_table(table, path, **kw)
        back = pq.read_table(path)
        assert back.equals(table), name
        expected[name + ".parquet"] = {"rows": back.to_pylist(), "meta": meta_of(path)}
    with open(os.path.join(args.out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1, sort_keys=False)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out))
    print("wrote %d files, %d bytes, pyarrow %s" % (len(expected) - 1, total, pa.__version__))


if __name__ == "__main__":
    main()
