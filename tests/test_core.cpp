// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// engine/core: error categories and exit codes, strict UTF-8, whole-file reads and JSON errors with
// file:line:col.
#include <QTemporaryDir>
#include <QtTest>

#include "core/files.h"
#include "core/utf8.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
namespace fs = std::filesystem;

class TestCore : public QObject {
    Q_OBJECT

private slots:
    void exit_codes() {
        QCOMPARE(exit_code_for(ErrorCategory::InvalidInput), 2);
        QCOMPARE(exit_code_for(ErrorCategory::Io), 2);
        QCOMPARE(exit_code_for(ErrorCategory::OutOfMemory), 3);
        QCOMPARE(exit_code_for(ErrorCategory::Unsupported), 4);
        QCOMPARE(exit_code_for(ErrorCategory::Cancelled), 130);
        QCOMPARE(exit_code_for(ErrorCategory::Internal), 1);
        QCOMPARE(exit_code_for(ErrorCategory::Device), 1);
        QCOMPARE(std::string(error_category_name(ErrorCategory::Unsupported)), std::string("unsupported"));
    }

    void utf8_is_strict() {
        QVERIFY(utf8::is_valid("plain ascii"));
        QVERIFY(utf8::is_valid("\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x91\x8d"));  // 日本 👍
        size_t bad = 0;
        QVERIFY(!utf8::is_valid("ok \xc0\xaf", &bad));                      // overlong '/'
        QCOMPARE(bad, size_t(3));
        QVERIFY(!utf8::is_valid("\xed\xa0\x80"));                           // UTF-16 surrogate D800
        QVERIFY(!utf8::is_valid("\xf4\x90\x80\x80"));                       // above U+10FFFF
        QVERIFY(!utf8::is_valid("cut \xe6\x97", &bad));                     // truncated sequence
        QCOMPARE(bad, size_t(4));
        QVERIFY(!utf8::is_valid("\x80"));                                   // stray continuation byte
        std::string out;
        for (char32_t cp : {U'A', U'\u00e9', U'\u65e5', U'\U0001F44D'}) utf8::append(out, cp);
        size_t i = 0;
        QCOMPARE(utf8::decode(out, i), int32_t('A'));
        QCOMPARE(utf8::decode(out, i), int32_t(0xE9));
        QCOMPARE(utf8::decode(out, i), int32_t(0x65E5));
        QCOMPARE(utf8::decode(out, i), int32_t(0x1F44D));
        QCOMPARE(i, out.size());
        size_t line = 0, col = 0;
        utf8::line_col("ab\ncd\nef", 7, line, col);
        QCOMPARE(line, size_t(3));
        QCOMPARE(col, size_t(2));
    }

    void file_and_json_errors() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        test::expect_error([&] { read_file(root / "absent.json"); }, ErrorCategory::Io, {"absent.json"});
        test::expect_error([&] { read_file(root); }, ErrorCategory::Io, {"directory"});
        test::write_file(root / "big.json", std::string(100, ' '));
        test::expect_error([&] { read_file(root / "big.json", 10); }, ErrorCategory::InvalidInput, {"big.json"});
        test::write_file(root / "bad.json", "{\n  \"a\": 1,\n  \"b\": ]\n}");
        test::expect_error([&] { read_json_file(root / "bad.json"); }, ErrorCategory::InvalidInput, {"bad.json:3:"});
        test::write_file(root / "nul.json", std::string("{}\0junk", 7));
        test::expect_error([&] { read_json_file(root / "nul.json"); }, ErrorCategory::InvalidInput, {"NUL"});
        // Found by fuzz_model_config: a number beyond double's range is an out_of_range exception in nlohmann,
        // not a parse_error; it must still be an InvalidInput naming the file.
        test::write_file(root / "huge.json", "{\"rope_theta\": 1e309}");
        test::expect_error([&] { read_json_file(root / "huge.json"); }, ErrorCategory::InvalidInput,
                           {"huge.json", "number overflow"});
        test::write_file(root / "good.json", "{\"x\": [1, 2]}");
        QCOMPARE(read_json_file(root / "good.json").at("x").size(), size_t(2));
    }
};

QTEST_GUILESS_MAIN(TestCore)
#include "test_core.moc"
