// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Tests for engine/io: memory mapping, atomic writes, the safetensors reader/writer (round trips, golden
// bytes, the torch-written fixture, the real babyllama weights) and a bad-input suite of corrupt files.
// Every bad file must throw tandem::Error with the expected category and a message naming the file.
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "io/atomic_file.h"
#include "io/mapped_file.h"
#include "tandem/error.h"
#include "tandem/safetensors.h"
#include "core/files.h"
#include "test_support.h"

using namespace tandem;
using tandem::test::expect_error;
namespace fs = std::filesystem;

Q_DECLARE_METATYPE(std::string)

namespace {

std::string le64(uint64_t n) {
    std::string s(8, '\0');
    std::memcpy(s.data(), &n, 8);
    return s;
}

// A raw safetensors file: length prefix (the true header length unless `lying_length` is given), header, data.
std::string raw_file(const std::string& header, const std::string& data,
                     std::optional<uint64_t> lying_length = std::nullopt) {
    return le64(lying_length.value_or(header.size())) + header + data;
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
    return std::as_bytes(std::span<const T>(v));
}

template <class T>
std::vector<T> values_of(const TensorInfo& t) {
    std::vector<T> out(t.data.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), t.data.data(), t.data.size());
    return out;
}


// The fixture tensors described in tests/reference/check_safetensors_roundtrip.py.
struct Fixture {
    std::vector<float> f32{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
    std::vector<uint16_t> f16;
    std::vector<uint16_t> bf16;
    std::vector<int64_t> i64;
    std::vector<float> scalar{3.25f};
    std::vector<float> empty;
    Fixture() {
        for (int i = 0; i < 8; ++i) f16.push_back(f32_to_f16(i * 0.25f - 1.0f));
        for (int i = 0; i < 5; ++i) bf16.push_back(f32_to_bf16(i * 1.5f - 3.0f));
        for (int64_t i = 0; i < 4; ++i) i64.push_back(i * 1'000'000'000'000LL - 5);
    }
    std::vector<TensorToWrite> tensors() const {
        return {
            {"f32", DType::F32, {2, 3}, bytes_of(f32)},   {"f16", DType::F16, {2, 2, 2}, bytes_of(f16)},
            {"bf16", DType::BF16, {5}, bytes_of(bf16)},   {"i64", DType::I64, {4}, bytes_of(i64)},
            {"scalar", DType::F32, {}, bytes_of(scalar)}, {"empty", DType::F32, {0, 4}, bytes_of(empty)},
        };
    }
};

// Checks a file holding the fixture tensors (whoever wrote it).
void check_fixture_file(const fs::path& path) {
    SafetensorsFile f(path);
    QCOMPARE(f.size(), size_t(6));
    QCOMPARE(f.metadata().size(), size_t(1));
    QCOMPARE(QString::fromStdString(f.metadata().at("format")), QString("pt"));
    // Data order of the reference writer: dtype size descending, then name.
    const std::vector<std::string> order{"i64", "empty", "f32", "scalar", "bf16", "f16"};
    QCOMPARE(f.names(), order);

    const auto& i64 = f.at("i64");
    QCOMPARE(i64.dtype, DType::I64);
    QCOMPARE(i64.shape, (std::vector<int64_t>{4}));
    QCOMPARE(values_of<int64_t>(i64), (std::vector<int64_t>{-5, 999999999995LL, 1999999999995LL, 2999999999995LL}));
    QCOMPARE(i64.data_begin, uint64_t(0));

    const auto& f32 = f.at("f32");
    QCOMPARE(f32.shape, (std::vector<int64_t>{2, 3}));
    QCOMPARE(tensor_to_f32(f32), (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f}));

    const auto& f16 = f.at("f16");
    QCOMPARE(f16.dtype, DType::F16);
    QCOMPARE(f16.shape, (std::vector<int64_t>{2, 2, 2}));
    const auto f16v = tensor_to_f32(f16);
    for (int i = 0; i < 8; ++i) QCOMPARE(f16v[i], i * 0.25f - 1.0f);

    const auto& bf16 = f.at("bf16");
    QCOMPARE(bf16.dtype, DType::BF16);
    QCOMPARE(tensor_to_f32(bf16), (std::vector<float>{-3.0f, -1.5f, 0.0f, 1.5f, 3.0f}));

    const auto& scalar = f.at("scalar");
    QVERIFY(scalar.shape.empty());
    QCOMPARE(scalar.numel(), int64_t(1));
    QCOMPARE(tensor_to_f32(scalar), (std::vector<float>{3.25f}));

    const auto& empty = f.at("empty");
    QCOMPARE(empty.shape, (std::vector<int64_t>{0, 4}));
    QCOMPARE(empty.numel(), int64_t(0));
    QCOMPARE(empty.data.size(), size_t(0));
    QCOMPARE(f.data_size(), uint64_t(32 + 24 + 4 + 10 + 16));
}

}  // namespace

class TestSafetensors : public QObject {
    Q_OBJECT

private slots:
    // --- dtypes and conversions ----------------------------------------------------------------------
    void dtypes() {
        QCOMPARE(dtype_size(DType::BF16), size_t(2));
        QCOMPARE(dtype_size(DType::I64), size_t(8));
        QCOMPARE(dtype_size(DType::BOOL), size_t(1));
        QCOMPARE(std::string(dtype_name(DType::F8_E4M3)), std::string("F8_E4M3"));
        QVERIFY(parse_dtype("BF16") == DType::BF16);
        QVERIFY(!parse_dtype("bf16"));  // the format is case-sensitive
        QVERIFY(!parse_dtype("F4"));
        QVERIFY(dtype_converts_to_f32(DType::F16));
        QVERIFY(!dtype_converts_to_f32(DType::I32));
    }

    void halfConversions() {
        QCOMPARE(f16_to_f32(0x3C00), 1.0f);
        QCOMPARE(f16_to_f32(0xC000), -2.0f);
        QCOMPARE(f16_to_f32(0x7BFF), 65504.0f);
        QCOMPARE(f16_to_f32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
        QCOMPARE(f16_to_f32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
        QVERIFY(std::isinf(f16_to_f32(0x7C00)));
        QVERIFY(std::isnan(f16_to_f32(0x7E00)));
        QVERIFY(std::signbit(f16_to_f32(0x8000)));
        // Every half survives f16 -> f32 -> f16; every bf16 survives bf16 -> f32 -> bf16 (NaNs stay NaN).
        for (uint32_t h = 0; h < 65536; ++h) {
            const float f = f16_to_f32(uint16_t(h));
            if (std::isnan(f) ? !std::isnan(f16_to_f32(f32_to_f16(f))) : f32_to_f16(f) != h)
                QFAIL(qPrintable(QString("f16 round trip fails for 0x%1").arg(h, 4, 16)));
            const float b = bf16_to_f32(uint16_t(h));
            if (std::isnan(b) ? !std::isnan(bf16_to_f32(f32_to_bf16(b))) : f32_to_bf16(b) != h)
                QFAIL(qPrintable(QString("bf16 round trip fails for 0x%1").arg(h, 4, 16)));
        }
        // Round to nearest, ties to even.
        QCOMPARE(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), uint16_t(0x3F80));      // tie -> even (down)
        QCOMPARE(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), uint16_t(0x3F82));  // tie -> even (up)
        QCOMPARE(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), uint16_t(0x3C00));
        QCOMPARE(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), uint16_t(0x3C02));
        QCOMPARE(f32_to_f16(65519.0f), uint16_t(0x7BFF));
        QCOMPARE(f32_to_f16(65520.0f), uint16_t(0x7C00));  // overflows to inf
        QCOMPARE(f32_to_f16(-1e10f), uint16_t(0xFC00));
        QCOMPARE(f32_to_f16(std::ldexp(1.0f, -25)), uint16_t(0x0000));  // tie between 0 and 1 unit -> 0
        QCOMPARE(f32_to_f16(std::ldexp(1.0f, -25) * 1.001f), uint16_t(0x0001));
        QCOMPARE(f32_to_f16(3 * std::ldexp(1.0f, -25)), uint16_t(0x0002));  // tie between 1 and 2 units -> 2
        QCOMPARE(f32_to_f16(std::ldexp(1.0f, -30)), uint16_t(0x0000));
        QCOMPARE(f32_to_f16(std::ldexp(1023.5f, -24)), uint16_t(0x0400));  // rounds up into the normals
    }

    void tensorToF32RejectsIntegers() {
        std::vector<int32_t> v{1, 2};
        const auto bytes = serialize_safetensors(std::vector<TensorToWrite>{{"ids", DType::I32, {2}, bytes_of(v)}});
        QTemporaryDir dir;
        const fs::path p = dir.filePath("ints.safetensors").toStdString();
        test::write_file(p, bytes);
        SafetensorsFile f(p);
        expect_error([&] { tensor_to_f32(f.at("ids")); }, ErrorCategory::Unsupported, {"ids", "I32"});
        std::vector<float> wrong(3);
        expect_error([&] { tensor_to_f32(f.at("ids"), wrong); }, ErrorCategory::Internal, {"ids"});
    }

    // --- mapping and atomic writes --------------------------------------------------------------------
    void mappedFile() {
        QTemporaryDir dir;
        const fs::path empty = dir.filePath("empty").toStdString();
        test::write_file(empty, "");
        MappedFile m(empty);
        QCOMPARE(m.size(), size_t(0));
        const fs::path some = dir.filePath("some").toStdString();
        test::write_file(some, "hello");
        MappedFile m2(some);
        QCOMPARE(std::string(reinterpret_cast<const char*>(m2.data()), m2.size()), std::string("hello"));
        MappedFile moved = std::move(m2);
        QCOMPARE(moved.size(), size_t(5));
        QCOMPARE(m2.size(), size_t(0));
        expect_error([&] { MappedFile x(dir.filePath("missing").toStdString()); }, ErrorCategory::Io,
                     {"missing", "not found"});
        expect_error([&] { MappedFile x(dir.path().toStdString()); }, ErrorCategory::Io, {"directory"});
    }

    void atomicWrites() {
        QTemporaryDir dir;
        const fs::path target = dir.filePath("out.bin").toStdString();
        write_file_atomic(target, std::string_view("first"));
        QCOMPARE(tandem::read_file(target), std::string("first"));
        write_file_atomic(target, std::string_view("second, longer"));
        QCOMPARE(tandem::read_file(target), std::string("second, longer"));

        // Streaming: many small writes plus writes larger than the 1 MiB buffer.
        std::string expected;
        {
            AtomicFileWriter w(target);
            for (int i = 0; i < 5000; ++i) {
                const std::string s = std::to_string(i) + ",";
                w.write(s);
                expected += s;
            }
            std::string big(3 << 20, 'x');
            for (size_t i = 0; i < big.size(); i += 4099) big[i] = char('a' + i % 26);
            w.write(big);
            expected += big;
            w.write(std::string_view("end"));
            expected += "end";
            QCOMPARE(w.bytes_written(), uint64_t(expected.size()));
            // Until commit the target still holds the previous content.
            QCOMPARE(tandem::read_file(target), std::string("second, longer"));
            w.commit();
        }
        QVERIFY(tandem::read_file(target) == expected);

        // Destroyed without commit (e.g. an exception while writing): target untouched, temp removed.
        {
            AtomicFileWriter w(target);
            w.write(std::string_view("half-written"));
            QVERIFY(fs::exists(w.temp_path()));
        }
        QVERIFY(tandem::read_file(target) == expected);
        size_t files = 0;
        for (const auto& e : fs::directory_iterator(dir.path().toStdString())) {
            ++files;
            QVERIFY2(e.path().filename() == "out.bin", qPrintable(QString::fromStdString(e.path().string())));
        }
        QCOMPARE(files, size_t(1));

        expect_error(
            [&] { write_file_atomic(fs::path(dir.filePath("no/such/folder/x").toStdString()), std::string_view("x")); },
            ErrorCategory::Io, {"no/such/folder/x", "does not exist"});
    }

    // --- writer --------------------------------------------------------------------------------------
    void goldenBytes() {
        // Byte layouts fixed by the format: compact JSON, dtype/shape/data_offsets order, space padding to 8.
        std::vector<float> v{0, 1, 2, 3, 4, 5};
        const auto one =
            serialize_safetensors(std::vector<TensorToWrite>{{"attn.0", DType::F32, {1, 2, 3}, bytes_of(v)}});
        const std::string hdr = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
        QCOMPARE(hdr.size(), size_t(64));
        QVERIFY(one == le64(64) + hdr + std::string(reinterpret_cast<const char*>(v.data()), 24));

        QVERIFY(serialize_safetensors({}) == le64(8) + "{}      ");
        const std::string meta_only = R"({"__metadata__":{"framework":"pt"}})";
        QVERIFY(serialize_safetensors({}, {{"framework", "pt"}}) == le64(40) + meta_only + "     ");

        // Escaping: quotes, backslashes and control characters; UTF-8 passes through.
        const auto esc = serialize_safetensors({}, {{"k\"\\", "line\nnext\x01 é"}});
        const std::string escaped = "{\"__metadata__\":{\"k\\\"\\\\\":\"line\\nnext\\u0001 é\"}}";
        QVERIFY(esc.find(escaped) != std::string::npos);
    }

    void roundTrip() {
        QTemporaryDir dir;
        const fs::path p = dir.filePath("rt.safetensors").toStdString();
        std::vector<double> f64{1.5, -2.25, 1e300};
        std::vector<float> f32(3 * 5);
        for (size_t i = 0; i < f32.size(); ++i) f32[i] = float(i) * 0.1f - 0.7f;
        std::vector<uint16_t> bf16, f16;
        for (float x : f32) {
            bf16.push_back(f32_to_bf16(x));
            f16.push_back(f32_to_f16(x));
        }
        std::vector<int64_t> i64{std::numeric_limits<int64_t>::min(), 0, std::numeric_limits<int64_t>::max()};
        std::vector<int32_t> i32{-7, 7};
        std::vector<int16_t> i16{-300, 300, 1};
        std::vector<int8_t> i8{-1, 2, -3, 4};
        std::vector<uint8_t> u8{255, 0, 17};
        std::vector<uint8_t> boolv{1, 0, 1, 1};
        std::vector<float> none;
        std::vector<float> scalar{42.0f};
        const std::vector<TensorToWrite> in{
            {"w.f64", DType::F64, {3}, bytes_of(f64)},
            {"model.layers.0.self_attn.q_proj.weight", DType::F32, {3, 5}, bytes_of(f32)},
            {"b.bf16", DType::BF16, {5, 3}, bytes_of(bf16)},
            {"a.f16", DType::F16, {15}, bytes_of(f16)},
            {"i64", DType::I64, {3}, bytes_of(i64)},
            {"i32", DType::I32, {1, 2}, bytes_of(i32)},
            {"i16", DType::I16, {3}, bytes_of(i16)},
            {"i8", DType::I8, {2, 2}, bytes_of(i8)},
            {"u8", DType::U8, {3}, bytes_of(u8)},
            {"mask", DType::BOOL, {4}, bytes_of(boolv)},
            {"empty", DType::F32, {4, 0}, bytes_of(none)},
            {"scalar", DType::F32, {}, bytes_of(scalar)},
            {"name with \"quotes\" and ünïcode", DType::U8, {3}, bytes_of(u8)},
        };
        const std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "a \"quoted\"\nline"}};
        write_safetensors(p, in, meta);
        QVERIFY(tandem::read_file(p) == serialize_safetensors(in, meta));

        SafetensorsFile f(p);
        QCOMPARE(f.size(), in.size());
        QCOMPARE(f.header_size() % 8, uint64_t(0));
        QVERIFY(f.metadata() == meta);
        for (const auto& t : in) {
            const auto& r = f.at(t.name);
            QCOMPARE(r.dtype, t.dtype);
            QCOMPARE(r.shape, t.shape);
            QCOMPARE(r.data.size(), t.data.size());
            QVERIFY(std::equal(r.data.begin(), r.data.end(), t.data.begin()));
        }
        // Writer order: dtype alignment descending (I64 > F64 > F32 > I32 > BF16 > F16 > I16 > U8/I8/BOOL), then name.
        const auto names = f.names();
        QCOMPARE(QString::fromStdString(names.front()), QString("i64"));
        QCOMPARE(QString::fromStdString(names[1]), QString("w.f64"));
        QCOMPARE(QString::fromStdString(names.back()), QString("mask"));
        // The data of each tensor is aligned to its element size inside the data section.
        for (const auto& t : f.tensors()) QCOMPARE(t.data_begin % dtype_size(t.dtype), uint64_t(0));
        QCOMPARE(tensor_to_f32(f.at("b.bf16"))[0], bf16_to_f32(bf16[0]));
        QCOMPARE(tensor_to_f32(f.at("w.f64"))[1], -2.25f);
        QVERIFY(!f.find("nope"));
        expect_error([&] { f.at("nope"); }, ErrorCategory::InvalidInput, {"rt.safetensors", "nope"});
    }

    void writerRejectsBadTensors() {
        std::vector<float> v(4);
        expect_error(
            [&] {
                serialize_safetensors(std::vector<TensorToWrite>{{"x", DType::F32, {5}, bytes_of(v)}});
            },
            ErrorCategory::Internal, {"'x'", "needs 20 bytes, got 16"});
        expect_error(
            [&] {
                serialize_safetensors(std::vector<TensorToWrite>{{"x", DType::F32, {4}, bytes_of(v)},
                                                                 {"x", DType::F32, {4}, bytes_of(v)}});
            },
            ErrorCategory::Internal, {"twice"});
        expect_error(
            [&] {
                serialize_safetensors(std::vector<TensorToWrite>{{"x", DType::F32, {-4}, bytes_of(v)}});
            },
            ErrorCategory::Internal, {"invalid shape"});
        expect_error(
            [&] {
                serialize_safetensors(std::vector<TensorToWrite>{{"__metadata__", DType::F32, {4}, bytes_of(v)}});
            },
            ErrorCategory::Internal, {"invalid tensor name"});
        // A failed write leaves no file behind.
        QTemporaryDir dir;
        const fs::path p = dir.filePath("bad.safetensors").toStdString();
        expect_error(
            [&] {
                write_safetensors(p, std::vector<TensorToWrite>{{"x", DType::F32, {5}, bytes_of(v)}});
            },
            ErrorCategory::Internal, {"'x'"});
        QVERIFY(!fs::exists(p));
        QVERIFY(fs::is_empty(dir.path().toStdString()));
    }

    // --- reader: what the reference library accepts, we accept -----------------------------------------
    void acceptsValidEdgeCases() {
        QTemporaryDir dir;
        const fs::path p = dir.filePath("edge.safetensors").toStdString();
        // No padding (header length 61, not a multiple of 8): data is unaligned in memory but readable.
        float vals[2] = {1.5f, -2.0f};
        const std::string data(reinterpret_cast<const char*>(vals), 8);
        const std::string hdr =
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})";
        test::write_file(p, raw_file(hdr, data));
        SafetensorsFile f(p);
        QCOMPARE(f.size(), size_t(2));
        QCOMPARE(tensor_to_f32(f.at("a")), (std::vector<float>{1.5f, -2.0f}));
        QCOMPARE(f.at("z").numel(), int64_t(0));  // zero-size tensor sharing offset 0
        // No tensors at all.
        test::write_file(p, raw_file("{}", ""));
        QCOMPARE(SafetensorsFile(p).size(), size_t(0));
        // Unknown extra keys in an entry are ignored, like the reference library.
        test::write_file(p, raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}})", "x"));
        QCOMPARE(SafetensorsFile(p).at("a").data.size(), size_t(1));
    }

    // --- reader: bad input ------------------------------------------------------------------------------
    void badFiles_data() {
        QTest::addColumn<std::string>("content");
        QTest::addColumn<QString>("needle");
        const std::string a16 = R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]})";
        const std::string d16(16, '\0');
        auto row = [](const char* name, std::string content, const char* needle) {
            QTest::newRow(name) << content << QString(needle);
        };
        row("empty file", "", "shorter than the 8-byte");
        row("7 bytes", "abcdefg", "shorter than the 8-byte");
        row("header past end", le64(1000) + "{}", "runs past the end of the file");
        row("header length 2^40", le64(uint64_t(1) << 40) + "{}", "above the limit");
        row("header length max", le64(std::numeric_limits<uint64_t>::max()) + "{}", "above the limit");
        row("header length 0", le64(0) + "{}", "header is empty");
        row("header length lies short", raw_file("{\"a\":{}}", "", 3), "not valid JSON");
        row("not json", raw_file("hello, world", ""), "not valid JSON");
        row("nul padding", raw_file(std::string("{}") + '\0' + '\0', ""), "NUL byte");
        row("nul then garbage", raw_file(std::string("{}") + '\0' + "[[[", ""), "NUL byte");
        row("json array", raw_file("[1,2,3]", ""), "must be a JSON object");
        row("json string", raw_file("\"abc\"", ""), "must be a JSON object");
        row("invalid utf8", raw_file("{\"\xff\xfe\":1}", ""), "UTF-8");
        row("entry not object", raw_file(R"({"a":5})", ""), "'a': header entry must be an object");
        row("missing dtype", raw_file(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", "abcd"), "no \"dtype\"");
        row("missing shape", raw_file(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", "abcd"), "no \"shape\"");
        row("missing offsets", raw_file(R"({"a":{"dtype":"F32","shape":[1]}})", "abcd"), "no \"data_offsets\"");
        row("dtype not string", raw_file(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", "abcd"),
            "dtype must be a string");
        row("unknown dtype", raw_file(R"({"a":{"dtype":"F4X","shape":[1],"data_offsets":[0,1]}})", "a"),
            "unknown dtype 'F4X'");
        row("lowercase dtype", raw_file(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", "abcd"),
            "unknown dtype 'f32'");
        row("shape not array", raw_file(R"({"a":{"dtype":"F32","shape":4,"data_offsets":[0,16]}})", d16),
            "shape must be an array");
        row("shape float", raw_file(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})", d16),
            "not an integer");
        row("shape string", raw_file(R"({"a":{"dtype":"F32","shape":["4"],"data_offsets":[0,16]}})", d16),
            "not an integer");
        row("negative dim", raw_file(R"({"a":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,16]}})", d16), "negative");
        row("overflowing dims",
            raw_file(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,16]}})",
                     d16),
            "overflows");
        row("overflowing bytes",
            raw_file(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,16]}})", d16), "overflows");
        row("dim above int64",
            raw_file(R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,16]}})", d16), "too large");
        row("offsets one value", raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0]}})", d16),
            "array of two integers");
        row("offsets not array", raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":"0-16"}})", d16),
            "array of two integers");
        row("offsets negative", raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[-16,0]}})", d16),
            "negative");
        row("offsets float", raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16.0]}})", d16),
            "not an integer");
        row("begin after end", raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[16,0]}})", d16),
            "begin is after end");
        row("offsets past end", raw_file("{" + a16 + "}", std::string(8, '\0')),
            "run past the end of the data section");
        row("offsets huge",
            raw_file(R"({"a":{"dtype":"U8","shape":[16],"data_offsets":[18446744073709551600,18446744073709551615]}})",
                     d16),
            "too large");
        row("shape/offset mismatch", raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", d16),
            "needs 12 bytes");
        row("overlap",
            raw_file(
                R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                std::string(24, '\0')),
            "overlap");
        row("same range twice",
            raw_file(
                R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                d16),
            "overlap");
        row("gap",
            raw_file(
                R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                std::string(24, '\0')),
            "gap of 8 bytes");
        row("gap at start", raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16),
            "gap of 8 bytes");
        row("trailing bytes", raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d16),
            "8 unexplained bytes");
        row("duplicate name", raw_file("{" + a16 + "," + a16 + "}", d16), "'a' twice");
        row("empty name", raw_file(R"({"":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d16), "empty name");
        row("metadata not object", raw_file(R"({"__metadata__":"pt"})", ""), "__metadata__ must be an object");
        row("metadata value int", raw_file(R"({"__metadata__":{"format":1}})", ""), "must be a string");
        // Found by fuzz_safetensors: nlohmann refuses a number beyond double's range with out_of_range, not
        // parse_error, which escaped as a non-tandem exception (the CLI's internal-error exit).
        row("number beyond double", raw_file(R"({"a":1e309})", ""), "number overflow");
        row("number beyond double in metadata", raw_file(R"({"__metadata__":{"x":-2e400}})", ""), "not valid JSON");
    }

    void badFiles() {
        QFETCH(std::string, content);
        QFETCH(QString, needle);
        QTemporaryDir dir;
        const fs::path p = dir.filePath("corrupt-file.safetensors").toStdString();
        test::write_file(p, content);
        expect_error([&] { SafetensorsFile f(p); }, ErrorCategory::InvalidInput,
                     {"corrupt-file.safetensors", needle.toStdString()});
    }

    void missingFileIsIoError() {
        QTemporaryDir dir;
        expect_error([&] { SafetensorsFile f(dir.filePath("absent.safetensors").toStdString()); }, ErrorCategory::Io,
                     {"absent.safetensors", "not found"});
    }

    // --- sets: index + shards ----------------------------------------------------------------------------
    void shardedIndex() {
        QTemporaryDir dir;
        const fs::path d = dir.path().toStdString();
        std::vector<float> a{1, 2}, b{3, 4, 5}, c{6};
        write_safetensors(
            d / "model-00001-of-00002.safetensors",
            std::vector<TensorToWrite>{{"a", DType::F32, {2}, bytes_of(a)}, {"b", DType::F32, {3}, bytes_of(b)}});
        write_safetensors(d / "model-00002-of-00002.safetensors",
                          std::vector<TensorToWrite>{{"c", DType::F32, {1}, bytes_of(c)},
                                                     {"unlisted", DType::F32, {1}, bytes_of(c)}});
        const std::string index = R"({"metadata":{"total_size":24},"weight_map":{"a":"model-00001-of-00002.safetensors",
            "b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})";
        test::write_file(d / "model.safetensors.index.json", index);

        const auto set = SafetensorsSet::open(d);
        QCOMPARE(set.files().size(), size_t(2));  // each shard mapped once
        QCOMPARE(set.names(), (std::vector<std::string>{"a", "b", "c"}));
        QVERIFY(!set.find("unlisted"));  // the index decides
        QCOMPARE(tensor_to_f32(set.at("b")), b);
        QCOMPARE(set.file_of("c").filename().string(), std::string("model-00002-of-00002.safetensors"));
        QCOMPARE(set.total_bytes(), uint64_t(24));
        QCOMPARE(set.index_path().filename().string(), std::string("model.safetensors.index.json"));
        expect_error([&] { set.at("zz"); }, ErrorCategory::InvalidInput, {"model.safetensors.index.json", "'zz'"});

        // Tensor listed but absent from its shard: names the index, the tensor and the shard.
        test::write_file(
            d / "model.safetensors.index.json",
            R"({"weight_map":{"a":"model-00001-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}})");
        expect_error([&] { SafetensorsSet::open(d); }, ErrorCategory::InvalidInput,
                     {"model.safetensors.index.json", "'c'", "model-00001-of-00002.safetensors"});
        // Missing shard.
        test::write_file(d / "model.safetensors.index.json",
                         R"({"weight_map":{"a":"model-00009-of-00009.safetensors"}})");
        expect_error([&] { SafetensorsSet::open(d); }, ErrorCategory::InvalidInput,
                     {"model.safetensors.index.json", "model-00009-of-00009.safetensors", "not found"});
        // A shard outside the folder.
        test::write_file(d / "model.safetensors.index.json",
                         R"({"weight_map":{"a":"../model-00001-of-00002.safetensors"}})");
        expect_error([&] { SafetensorsSet::open(d); }, ErrorCategory::InvalidInput,
                     {"model.safetensors.index.json", "same folder"});
        // Malformed indexes.
        test::write_file(d / "model.safetensors.index.json", R"({"weight_map":["a"]})");
        expect_error([&] { SafetensorsSet::open(d); }, ErrorCategory::InvalidInput,
                     {"model.safetensors.index.json", "weight_map"});
        test::write_file(d / "model.safetensors.index.json", R"({"weight_map":{"a":7}})");
        expect_error([&] { SafetensorsSet::open(d); }, ErrorCategory::InvalidInput,
                     {"model.safetensors.index.json", "'a'"});
        test::write_file(d / "model.safetensors.index.json", "{not json");
        expect_error([&] { SafetensorsSet::open(d); }, ErrorCategory::InvalidInput,
                     {"model.safetensors.index.json", "invalid JSON"});
        // A corrupt shard is reported with the shard's name.
        test::write_file(d / "model-00002-of-00002.safetensors", "garbage!!");
        test::write_file(d / "model.safetensors.index.json",
                         R"({"weight_map":{"c":"model-00002-of-00002.safetensors"}})");
        expect_error([&] { SafetensorsSet::open(d); }, ErrorCategory::InvalidInput,
                     {"model-00002-of-00002.safetensors"});

        // Several files without an index: a name in two files is an error naming both.
        write_safetensors(d / "x1.safetensors", std::vector<TensorToWrite>{{"a", DType::F32, {2}, bytes_of(a)}});
        write_safetensors(d / "x2.safetensors", std::vector<TensorToWrite>{{"a", DType::F32, {2}, bytes_of(a)}});
        expect_error(
            [&] {
                SafetensorsSet::open_files({d / "x1.safetensors", d / "x2.safetensors"});
            },
            ErrorCategory::InvalidInput, {"x1.safetensors", "x2.safetensors", "'a'"});
    }

    // --- fixtures and real weights -------------------------------------------------------------------------
    void torchWrittenFixture() {
        const auto p = test::fixtures() / "safetensors" / "torch_written.safetensors";
        if (!fs::exists(p))
            QSKIP(
                "tests/fixtures/safetensors/torch_written.safetensors not generated yet "
                "(python tests/reference/check_safetensors_roundtrip.py --write FILE)");
        check_fixture_file(p);
        // Our writer must produce exactly the reference library's bytes for the same tensors.
        const Fixture fx;
        QVERIFY2(serialize_safetensors(fx.tensors(), {{"format", "pt"}}) == tandem::read_file(p),
                 "serialize_safetensors differs from safetensors.torch.save_file for the fixture tensors");
    }

    void tandemWrittenFixture() {
        // The file the Python script checks with safetensors.torch (--check). Regenerate it with
        // TANDEM_REGENERATE_FIXTURES=1; otherwise our writer must reproduce the committed bytes exactly.
        const auto p = test::fixtures() / "safetensors" / "tandem_written.safetensors";
        const Fixture fx;
        if (qEnvironmentVariableIsSet("TANDEM_REGENERATE_FIXTURES"))
            write_safetensors(p, fx.tensors(), {{"format", "pt"}});
        if (!fs::exists(p)) QSKIP("tests/fixtures/safetensors/tandem_written.safetensors missing");
        check_fixture_file(p);
        QVERIFY(serialize_safetensors(fx.tensors(), {{"format", "pt"}}) == tandem::read_file(p));
    }

    void babyllamaWeights() {
        const auto p = test::assets() / "babyllama-tok105" / "hf" / "model.safetensors";
        TANDEM_REQUIRE_ASSET(p);
        SafetensorsFile f(p);
        QCOMPARE(f.file_size(), uint64_t(3750760));
        QCOMPARE(f.size(), size_t(47));
        int64_t params = 0;
        for (const auto& t : f.tensors()) {
            QCOMPARE(t.dtype, DType::F32);
            params += t.numel();
        }
        QCOMPARE(params, int64_t(936448));
        QCOMPARE(f.data_size(), uint64_t(936448) * 4);
        const auto& emb = f.at("model.embed_tokens.weight");
        QCOMPARE(emb.shape, (std::vector<int64_t>{105, 128}));
        const auto& k = f.at("model.layers.0.self_attn.k_proj.weight");
        QCOMPARE(k.shape, (std::vector<int64_t>{64, 128}));
        const auto w = tensor_to_f32(emb);
        double sum_abs = 0;
        for (float x : w) {
            QVERIFY(std::isfinite(x));
            sum_abs += std::fabs(x);
        }
        QVERIFY(sum_abs > 0);  // a trained model, not zeros
        const auto norm = tensor_to_f32(f.at("model.norm.weight"));
        QCOMPARE(norm.size(), size_t(128));
        const auto set = SafetensorsSet::open(p.parent_path());
        QCOMPARE(set.size(), size_t(47));
    }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
