// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// engine/data/parquet: every fixture pyarrow wrote (tests/fixtures/parquet, made by
// tests/reference/make_parquet_fixtures.py) reads back row for row; Parquet datasets give the same records as
// the same rows written as JSON Lines; and bad files (hand-built with a small Thrift writer below, or mutated
// fixtures) are refused with Error{InvalidInput} naming the file and the place, never a crash.
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "data/parquet.h"
#include "tandem/data.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

namespace {

fs::path parquet_dir() { return fixtures() / "parquet"; }

// ----- a minimal Parquet writer (Thrift compact protocol) for hand-made bad files --------------------------
struct ThriftWriter {
    std::string b;
    int16_t last = 0;
    std::vector<int16_t> stack;

    void varint(uint64_t v) {
        while (v >= 0x80) {
            b += static_cast<char>((v & 0x7F) | 0x80);
            v >>= 7;
        }
        b += static_cast<char>(v);
    }
    void zz(int64_t v) { varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
    void field(int16_t id, uint8_t type) {
        const int d = id - last;
        if (d > 0 && d <= 15) {
            b += static_cast<char>((d << 4) | type);
        } else {
            b += static_cast<char>(type);
            zz(id);
        }
        last = id;
    }
    void i32(int16_t id, int64_t v) { field(id, 5), zz(v); }
    void i64(int16_t id, int64_t v) { field(id, 6), zz(v); }
    void str(int16_t id, const std::string& s) { field(id, 8), varint(s.size()), b += s; }
    void begin(int16_t id) { field(id, 12), open(); }
    void open() { stack.push_back(last), last = 0; }
    void end() { b += '\0', last = stack.back(), stack.pop_back(); }
    void list(int16_t id, uint8_t elem, size_t n) {
        field(id, 9);
        if (n < 15) {
            b += static_cast<char>((n << 4) | elem);
        } else {
            b += static_cast<char>(0xF0 | elem);
            varint(n);
        }
    }
};

// One required BYTE_ARRAY column "text", one row group, one PLAIN v1 page; every knob can lie.
struct Spec {
    std::vector<std::string> values = {"hello", "world"};
    int type = 6;                   // BYTE_ARRAY
    int codec = 0;                  // UNCOMPRESSED
    int encoding = 0;               // PLAIN
    int64_t compressed_delta = 0;   // added to the page header's compressed size
    int64_t uncompressed_override = -1;
    int64_t page_values = -1;       // -1: the real count
    int64_t chunk_values = -1;
    int64_t num_rows = -1;
    int64_t rg_rows = -1;
    int64_t data_page_offset = -1;  // -1: the real one (4)
    int64_t dictionary_values = -1;  // >= 0: a dictionary page before the data page declaring this many values
    int schema_children = 1;
    std::string name = "text";
    std::string dict_value;  // non-empty: a one-value dictionary and an RLE_DICTIONARY page of dict_rows rows
    int64_t dict_rows = 0;
};

std::string make_parquet(Spec s) {
    std::string body;
    std::string dict_page;
    if (!s.dict_value.empty()) {
        const uint32_t n = static_cast<uint32_t>(s.dict_value.size());
        std::string dict_body(reinterpret_cast<const char*>(&n), 4);
        dict_body += s.dict_value;
        ThriftWriter d;
        d.open();
        d.i32(1, 2);  // DICTIONARY_PAGE
        d.i32(2, static_cast<int64_t>(dict_body.size()));
        d.i32(3, static_cast<int64_t>(dict_body.size()));
        d.begin(7);
        d.i32(1, 1);
        d.i32(2, 0);
        d.end();
        d.end();
        dict_page = d.b + dict_body;
        // Bit width 0, then one RLE run of dict_rows zeros.
        body = std::string(1, '\0');
        ThriftWriter v;
        v.varint(static_cast<uint64_t>(s.dict_rows) << 1);
        body += v.b;
        s.values.assign(static_cast<size_t>(s.dict_rows), std::string());
        s.encoding = 8;
    } else {
        for (const auto& v : s.values) {
            const uint32_t n = static_cast<uint32_t>(v.size());
            body.append(reinterpret_cast<const char*>(&n), 4);
            body += v;
        }
    }
    const int64_t nv = static_cast<int64_t>(s.values.size());
    std::string file = "PAR1" + dict_page;
    if (s.dictionary_values >= 0) {
        ThriftWriter d;
        d.open();
        d.i32(1, 2);  // DICTIONARY_PAGE
        d.i32(2, 4);
        d.i32(3, 4);
        d.begin(7);
        d.i32(1, s.dictionary_values);
        d.i32(2, 0);
        d.end();
        d.end();
        file += d.b;
        file += std::string("\x03\0\0\0", 4);  // one value's length prefix claiming 3 bytes: "abc" missing
    }
    const int64_t data_at = static_cast<int64_t>(file.size());
    ThriftWriter h;
    h.open();
    h.i32(1, 0);  // DATA_PAGE
    h.i32(2, s.uncompressed_override >= 0 ? s.uncompressed_override : static_cast<int64_t>(body.size()));
    h.i32(3, static_cast<int64_t>(body.size()) + s.compressed_delta);
    h.begin(5);
    h.i32(1, s.page_values >= 0 ? s.page_values : nv);
    h.i32(2, s.encoding);
    h.i32(3, 3);
    h.i32(4, 3);
    h.end();
    h.end();
    file += h.b + body;
    const int64_t chunk_size = static_cast<int64_t>(file.size()) - 4;

    ThriftWriter f;
    f.open();
    f.i32(1, 1);
    f.list(2, 12, 2);
    f.open();  // root
    f.str(4, "schema");
    f.i32(5, s.schema_children);
    f.end();
    f.open();  // the column
    f.i32(1, s.type);
    f.i32(3, 0);
    f.str(4, s.name);
    f.end();
    f.i64(3, s.num_rows >= 0 ? s.num_rows : nv);
    f.list(4, 12, 1);
    f.open();  // RowGroup
    f.list(1, 12, 1);
    f.open();  // ColumnChunk
    f.i64(2, 4);
    f.begin(3);  // ColumnMetaData
    f.i32(1, s.type);
    f.list(2, 5, 1);
    f.zz(0);
    f.list(3, 8, 1);
    f.varint(s.name.size());
    f.b += s.name;
    f.i32(4, s.codec);
    f.i64(5, s.chunk_values >= 0 ? s.chunk_values : nv);
    f.i64(6, chunk_size);
    f.i64(7, chunk_size);
    f.i64(9, s.data_page_offset >= 0 ? s.data_page_offset : data_at);
    if (s.dictionary_values >= 0 || !dict_page.empty()) f.i64(11, 4);
    f.end();
    f.end();  // ColumnChunk
    f.i64(2, chunk_size);
    f.i64(3, s.rg_rows >= 0 ? s.rg_rows : nv);
    f.end();  // RowGroup
    f.end();  // FileMetaData
    const uint32_t len = static_cast<uint32_t>(f.b.size());
    file += f.b;
    file.append(reinterpret_cast<const char*>(&len), 4);
    file += "PAR1";
    return file;
}

std::vector<ojson> rows_of(const std::string& bytes, const std::string& name = "bad.parquet") {
    return parquet::File(bytes, name).read_rows();
}

json plain(const ojson& j) { return json::parse(j.dump()); }

void expect_invalid(const std::string& bytes, const std::vector<std::string>& needles) {
    expect_error([&] { (void)rows_of(bytes); }, ErrorCategory::InvalidInput, needles);
}

}  // namespace

class TestParquet : public QObject {
    Q_OBJECT

private slots:
    // Every pyarrow fixture: all rows, every column, identical to pyarrow's to_pylist().
    void fixtures_read_back() {
        const ojson expected = read_json_file(parquet_dir() / "expected.json");
        int files = 0;
        for (auto it = expected.begin(); it != expected.end(); ++it) {
            if (it.key() == "pyarrow") continue;
            ++files;
            const std::string bytes = read_file(parquet_dir() / it.key());
            const parquet::File file(bytes, it.key());
            const auto rows = file.read_rows();
            const auto& want = it.value().at("rows");
            QCOMPARE(static_cast<size_t>(file.num_rows()), want.size());
            QCOMPARE(file.num_row_groups(), it.value().at("meta").at("row_groups").size());
            QCOMPARE(rows.size(), want.size());
            for (size_t r = 0; r < rows.size(); ++r)
                QVERIFY2(plain(rows[r]) == plain(want[r]),
                         qPrintable(QString::fromStdString(it.key() + " row " + std::to_string(r) + ": got " +
                                                           rows[r].dump() + ", want " + want[r].dump())));
        }
        QVERIFY(files >= 17);
    }

    // Only the requested top-level fields are decoded.
    void selected_fields() {
        const std::string bytes = read_file(parquet_dir() / "types_plain_none_v1.parquet");
        const auto rows = parquet::File(bytes, "t").read_rows({"text", "b"});
        QCOMPARE(rows.size(), size_t(23));
        QCOMPARE(rows[0].size(), size_t(2));
        QVERIFY(rows[0].contains("b") && rows[0].contains("text") && !rows[0].contains("i32"));
        const auto fields = parquet::File(bytes, "t").fields();
        QCOMPARE(fields, (std::vector<std::string>{"i32", "i64", "b", "f32", "f64", "text", "req"}));
    }

    // A Parquet dataset gives exactly the records (and invalid records) of the same rows as JSON Lines.
    void same_records_as_jsonl() {
        const ojson expected = read_json_file(parquet_dir() / "expected.json");
        QTemporaryDir tmp;
        ReadOptions opt;
        opt.max_invalid_fraction = 1.0;
        for (const char* name : {"alpaca_plain_none_v1", "alpaca_dict_snappy_v1", "alpaca_rowgroups_snappy",
                                 "chat_dict_snappy_v1", "chat_rowgroups_gzip_v1", "chat_plain_zstd_v2",
                                 "sharegpt_snappy", "prompt_completion_zstd", "text_none"}) {
            const std::string file = std::string(name) + ".parquet";
            std::string jsonl;
            for (const auto& row : expected.at(file).at("rows")) jsonl += row.dump() + "\n";
            const fs::path jpath = fs::path(tmp.path().toStdString()) / (std::string(name) + ".jsonl");
            write_file(jpath, jsonl);
            const Dataset a = read_dataset(parquet_dir() / file, opt);
            const Dataset b = read_dataset(jpath, opt);
            QCOMPARE(a.format, b.format);
            QCOMPARE(a.total_records, b.total_records);
            QCOMPARE(a.invalid.count, b.invalid.count);
            QCOMPARE(a.invalid.by_reason, b.invalid.by_reason);
            QCOMPARE(a.records.size(), b.records.size());
            for (size_t i = 0; i < a.records.size(); ++i) {
                const Record &x = a.records[i], &y = b.records[i];
                QCOMPARE(x.location.line, y.location.line);  // row number == JSONL line
                QCOMPARE(x.messages.size(), y.messages.size());
                for (size_t m = 0; m < x.messages.size(); ++m) {
                    QCOMPARE(x.messages[m].role, y.messages[m].role);
                    QCOMPARE(x.messages[m].content, y.messages[m].content);
                }
                QCOMPARE(x.prompt, y.prompt);
                QCOMPARE(x.completion, y.completion);
                QCOMPARE(x.text, y.text);
            }
        }
        // The chat fixture's bad rows are reported like JSON's, with the file and the row.
        const Dataset chat = read_dataset(parquet_dir() / "chat_dict_snappy_v1.parquet", opt);
        QCOMPARE(chat.format, DatasetFormat::Chat);
        QCOMPARE(chat.records.size(), size_t(3));
        QVERIFY(chat.invalid.first[0].location.find("chat_dict_snappy_v1.parquet:3") != std::string::npos);
        // With the default limit (10%) those 4 of 7 bad rows fail the load, naming the file.
        expect_error([] { (void)read_dataset(parquet_dir() / "chat_dict_snappy_v1.parquet"); },
                     ErrorCategory::InvalidInput, {"chat_dict_snappy_v1.parquet", "invalid"});
    }

    void unknown_columns_and_forced_format() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        Spec s;
        s.name = "body";
        write_file(dir / "body.parquet", make_parquet(s));
        expect_error([&] { (void)read_dataset(dir / "body.parquet"); }, ErrorCategory::InvalidInput,
                     {"body.parquet", "cannot tell the dataset format", "\"body\"", "instruction"});
        // Auto-detection picks the text column among others; its null rows are invalid records.
        ReadOptions opt;
        opt.max_invalid_fraction = 1.0;
        const Dataset d = read_dataset(parquet_dir() / "types_plain_none_v1.parquet", opt);
        QCOMPARE(d.format, DatasetFormat::Text);
        QCOMPARE(d.total_records, int64_t(23));
        QCOMPARE(d.invalid.count, int64_t(3));  // rows 5, 14 and 23 have a null text
        QCOMPARE(d.invalid.first[0].location, (parquet_dir() / "types_plain_none_v1.parquet").string() + ":5");
        // --format forces a format: its keys must exist.
        opt.format = DatasetFormat::Alpaca;
        expect_error([&] { (void)read_dataset(parquet_dir() / "types_plain_none_v1.parquet", opt); },
                     ErrorCategory::InvalidInput, {"types_plain_none_v1.parquet", "missing \"instruction\""});
    }

    // The hand-written file reads back, so the mutations below test what they say.
    void writer_baseline() {
        const auto rows = rows_of(make_parquet({}));
        QCOMPARE(rows.size(), size_t(2));
        QCOMPARE(rows[1].at("text").get<std::string>(), std::string("world"));
    }

    void bad_files() {
        // Magic and footer.
        std::string good = make_parquet({});
        expect_invalid("PAR1", {"bad.parquet", "too short"});
        std::string bad = good;
        bad[0] = 'X';
        expect_invalid(bad, {"bad.parquet", "magic"});
        expect_invalid(good.substr(0, good.size() - 20) + "PAR1", {"bad.parquet"});
        bad = good;
        const uint32_t huge = 0x7FFFFFF0;
        std::memcpy(bad.data() + bad.size() - 8, &huge, 4);
        expect_invalid(bad, {"bad.parquet", "footer", "claims"});
        // A truncated download: the footer is gone.
        expect_invalid(good.substr(0, good.size() / 2), {"bad.parquet", "magic"});

        Spec s;
        s.compressed_delta = 1000;  // the page claims more bytes than the file has
        expect_invalid(make_parquet(s), {"bad.parquet", "row group 0", "column 'text'", "page 0", "remain"});
        s = {};
        s.data_page_offset = 1 << 30;  // lying offset
        expect_invalid(make_parquet(s), {"column 'text'", "outside the file"});
        s = {};
        s.codec = 99;
        s.compressed_delta = 0;
        expect_invalid(make_parquet(s), {"column 'text'", "codec number 99", "not supported"});
        s.codec = 5;  // LZ4 (Hadoop): known, not read
        expect_invalid(make_parquet(s), {"LZ4", "not supported", "re-save"});
        s = {};
        s.codec = 1;  // SNAPPY, but the bytes are not snappy
        s.uncompressed_override = 0x7FFFFFFF;
        expect_invalid(make_parquet(s), {"page 0", "decompressed bytes"});
        s = {};
        s.type = 3;  // INT96
        expect_invalid(make_parquet(s), {"INT96", "not supported"});
        s = {};
        s.encoding = 5;  // DELTA_BINARY_PACKED
        expect_invalid(make_parquet(s), {"DELTA_BINARY_PACKED", "not supported"});
        s = {};
        s.dictionary_values = 1 << 30;  // huge dictionary in a 4-byte page
        expect_invalid(make_parquet(s), {"page 0", "cannot fit"});
        s = {};
        // A dictionary-encoded page reads back; one that repeats a 1 MB value 2000 times (2 GB from a 1 MB
        // file) is refused before anything is copied.
        s.dict_value = "abc";
        s.dict_rows = 4;
        auto rows = rows_of(make_parquet(s));
        QCOMPARE(rows.size(), size_t(4));
        QCOMPARE(rows[3].at("text").get<std::string>(), std::string("abc"));
        s.dict_value.assign(size_t(1) << 20, 'x');
        s.dict_rows = 2000;
        expect_invalid(make_parquet(s), {"page 1", "once decoded"});
        s = {};
        s.num_rows = 5;
        expect_invalid(make_parquet(s), {"footer", "rows"});
        s = {};
        s.rg_rows = s.num_rows = int64_t(1) << 40;
        expect_invalid(make_parquet(s), {"row group 0", "rows"});
        s = {};
        s.page_values = 1000;
        expect_invalid(make_parquet(s), {"page 0", "1000"});
        s = {};
        s.chunk_values = 3;  // more values than rows, in a flat column
        expect_invalid(make_parquet(s), {"column 'text'", "values"});
        s = {};
        s.values = {"a", "b", "c"};
        s.chunk_values = 3;
        s.page_values = 3;
        s.rg_rows = s.num_rows = 3;
        QCOMPARE(rows_of(make_parquet(s)).size(), size_t(3));
        s.schema_children = 5;
        expect_invalid(make_parquet(s), {"schema"});

        // read_dataset: a .parquet file that is not one is refused with exit code 2, naming it.
        QTemporaryDir tmp;
        const fs::path p = fs::path(tmp.path().toStdString()) / "data.parquet";
        write_file(p, good.substr(0, good.size() - 3));
        expect_error([&] { (void)read_dataset(p); }, ErrorCategory::InvalidInput, {"data.parquet", "magic"});
        QCOMPARE(exit_code_for(ErrorCategory::InvalidInput), 2);
    }

    // tandem-cli data reads Parquet like JSON; a broken file is exit code 2 naming it, never a crash.
    void cli_reads_parquet() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const auto qs = [](const fs::path& p) { return QString::fromStdString(p.string()); };
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}).exit_code, 0);
        CliResult r = run_cli({"data", "--model", qs(root / "demo"), "--dataset",
                               qs(parquet_dir() / "alpaca_dict_zstd_v2.parquet"), "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const json j = json::parse(r.out.toStdString());
        QCOMPARE(j.at("format").get<std::string>(), std::string("alpaca"));
        QCOMPARE(j.at("records").at("valid").get<int>(), 7);
        r = run_cli({"data", "--model", qs(root / "demo"), "--dataset", qs(parquet_dir() / "chat_none_v2.parquet"),
                     "--max-invalid", "1"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const std::string good = read_file(parquet_dir() / "chat_none_v2.parquet");
        write_file(root / "cut.parquet", good.substr(0, good.size() - 10));
        r = run_cli({"data", "--model", qs(root / "demo"), "--dataset", qs(root / "cut.parquet")});
        QCOMPARE(r.exit_code, 2);
        QVERIFY(!r.crashed);
        QVERIFY2(r.err.contains("cut.parquet") && r.err.contains("invalid input"), r.err.constData());
    }

    // Mutation fuzzing of real fixtures: every truncation of the tail and single-byte changes across the whole
    // file must read or throw tandem::Error, never crash or hang (run under ASan + UBSan in CI).
    void mutated_fixtures_never_crash() {
        int refused = 0, read = 0;
        for (const char* name : {"chat_dict_snappy_v1.parquet", "alpaca_dict_zstd_v2.parquet",
                                 "types_pages_gzip_v2.parquet", "chat_plain_zstd_v2.parquet"}) {
            const std::string good = read_file(parquet_dir() / name);
            auto attempt = [&](const std::string& bytes) {
                try {
                    (void)rows_of(bytes, name);
                    ++read;
                } catch (const Error& e) {
                    QVERIFY2(e.category() == ErrorCategory::InvalidInput, e.what());
                    ++refused;
                }
            };
            for (size_t cut = 0; cut < good.size(); cut += 7) attempt(good.substr(0, cut));
            uint32_t rng = 12345;
            for (size_t i = 0; i < good.size(); ++i) {
                for (uint8_t v : {uint8_t(0x00), uint8_t(0xFF), uint8_t(0x7F)}) {
                    std::string bad = good;
                    rng = rng * 1103515245u + 12345u;
                    bad[i] = static_cast<char>(v ^ static_cast<uint8_t>(rng >> 24) ^ static_cast<uint8_t>(good[i]));
                    attempt(bad);
                }
            }
        }
        QVERIFY(refused > 100);
        qInfo("mutations: %d read, %d refused", read, refused);
    }
};

QTEST_GUILESS_MAIN(TestParquet)
#include "test_parquet.moc"
