// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The studio's Hub downloads and column mapping, driven as a user drives them, against the mock Hub on
// loopback (tests/mock_hub.py, as test_hub starts it; CI has no internet): the Model page's Check (size
// preview, "fits your GPU?"), Download (progress, the cache list refreshed, the model selected), Cancel and
// resume, gated / missing repos in screen words; the Data page's dataset download with the train split
// preselected among several files; the column-mapping dialog applied, remembered per file, and carried to
// the Train page's run config.
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

#include "tandem/data.h"
#include "tandem/demo_model.h"
#include "ui/column_mapping_dialog.h"
#include "ui/data_page.h"
#include "ui/hf_cache.h"
#include "ui/hub_download.h"
#include "ui/model_page.h"
#include "ui/status_text.h"
#include "ui/train_page.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

constexpr int kWaitMs = 60000;

template <typename T>
T* child(QWidget* page, const char* name) {
    T* w = page->findChild<T*>(QString::fromLatin1(name));
    if (!w) qFatal("no widget named %s", name);
    return w;
}

void writeText(const QString& path, const QByteArray& text) {
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
    f.write(text);
}

QString label(QWidget* page, const char* name) { return child<QLabel>(page, name)->text(); }

// Types a repo id into the page's Hub box and presses a button of it.
void enterRepo(QWidget* page, const QString& id) {
    auto* edit = child<QLineEdit>(page, "hubRepoEdit");
    edit->clear();
    QTest::keyClicks(edit, id);
}

const QByteArray kAlpacaRows = R"({"instruction": "Say hi", "output": "hi"}
{"instruction": "Say bye", "output": "bye"}
{"instruction": "Count to two", "output": "one two"}
)";

}  // namespace

class TestUiHub : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_tmp;
    QProcess m_hub;
    QString m_endpoint;
    int m_cacheCount = 0;
    QString m_cache;  // this test's HF_HUB_CACHE

    bool hubStarted() const { return !m_endpoint.isEmpty(); }

    QString fetchLog() {
        QProcess p;
        p.start("python3", {"-c", QStringLiteral("import urllib.request,sys;sys.stdout.write(urllib.request.urlopen("
                                                 "'%1/_log').read().decode())")
                                      .arg(m_endpoint)});
        p.waitForFinished(10000);
        return QString::fromUtf8(p.readAllStandardOutput());
    }

    // Files under the test's cache whose name ends with `suffix`.
    QStringList cacheFiles(const QString& suffix) const {
        QStringList out;
        QDirIterator it(m_cache, QDir::Files | QDir::System | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
        while (it.hasNext()) {
            const QString f = it.next();
            if (f.endsWith(suffix)) out.append(f);
        }
        return out;
    }

private slots:
    void initTestCase() {
        QVERIFY(m_tmp.isValid());
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("Tandem"));
        QCoreApplication::setApplicationName(QStringLiteral("TandemHubTest"));
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, m_tmp.filePath(QStringLiteral("settings")));
        QSettings().clear();

        // Served repos: the demo model (trainable), and a dataset with train and test splits.
        const QString demo = m_tmp.filePath(QStringLiteral("serve/demo"));
        create_demo_model(demo.toStdString());
        const QString splits = m_tmp.filePath(QStringLiteral("serve/splits"));
        writeText(splits + "/README.md", "---\nlicense: mit\n---\n");
        writeText(splits + "/data/test-00000-of-00001.jsonl", kAlpacaRows);
        writeText(splits + "/data/train-00000-of-00001.jsonl", kAlpacaRows + kAlpacaRows);

        qputenv("HF_HOME", m_tmp.filePath(QStringLiteral("hf-home")).toUtf8());  // no token file there
        qunsetenv("HF_TOKEN");
        qunsetenv("HF_TOKEN_PATH");
        qunsetenv("HF_HUB_OFFLINE");
        m_hub.start("python3", {QString::fromUtf8(TANDEM_SOURCE_DIR) + "/tests/mock_hub.py", "--serve",
                                "model:acme/demo=" + demo, "--serve", "dataset:acme/splits=" + splits});
        if (!m_hub.waitForStarted(10000)) return;
        for (int i = 0; i < 100 && m_endpoint.isEmpty(); ++i) {
            m_hub.waitForReadyRead(100);
            const QByteArray line = m_hub.readLine().trimmed();
            if (line.startsWith("PORT ")) m_endpoint = QStringLiteral("http://127.0.0.1:") + QString::fromLatin1(line.mid(5));
        }
        qputenv("HF_ENDPOINT", m_endpoint.toUtf8());
    }

    void cleanupTestCase() {
        m_hub.closeWriteChannel();
        if (!m_hub.waitForFinished(3000)) {
            m_hub.kill();
            m_hub.waitForFinished(3000);
        }
    }

    void init() {
        if (!hubStarted()) QSKIP("python3 could not start tests/mock_hub.py");
        // Each test starts from an empty cache.
        m_cache = m_tmp.filePath(QStringLiteral("hub-%1").arg(++m_cacheCount));
        QDir().mkpath(m_cache);
        qputenv("HF_HUB_CACHE", m_cache.toUtf8());
    }

    // ----- Model page -----------------------------------------------------------------------------------

    void modelCheckShowsSizeAndFit() {
        ModelPage page;
        enterRepo(&page, "acme/demo");
        child<QPushButton>(&page, "hubCheckButton")->click();
        QTRY_VERIFY_WITH_TIMEOUT(!label(&page, "hubPreviewLabel").isEmpty(), kWaitMs);
        const QString preview = label(&page, "hubPreviewLabel");
        QVERIFY2(preview.contains(QRegularExpression(R"(\d+ files)")) && preview.contains("to download"),
                 qPrintable(preview));
        QVERIFY2(!preview.contains("already downloaded"), qPrintable(preview));
        // "Fits your GPU?" from the engine's estimate on the model's config.json (on the CPU: says so).
        auto* fit = child<QLabel>(&page, "hubFitLabel");
        QVERIFY(!fit->isHidden());
        QVERIFY2(fit->text().contains("GPU") && !fit->text().contains("Cannot tell"), qPrintable(fit->text()));
        // Check downloads nothing into the cache (config.json went to a throw-away folder).
        QVERIFY2(cacheFiles(QString()).isEmpty(), qPrintable(cacheFiles(QString()).join('\n')));
    }

    void modelDownloadSelectsTheModel() {
        ModelPage page;
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        enterRepo(&page, "acme/demo");
        child<QPushButton>(&page, "hubDownloadButton")->click();
        QTRY_VERIFY_WITH_TIMEOUT(changed.count() >= 1, kWaitMs);
        const QString folder = changed.last().at(0).toString();
        QVERIFY2(folder.startsWith(m_cache + "/models--acme--demo/snapshots/"), qPrintable(folder));
        QCOMPARE(changed.last().at(1).toBool(), true);
        QVERIFY(label(&page, "hubStatusLabel").startsWith("Downloaded acme/demo"));
        QCOMPARE(child<QProgressBar>(&page, "hubProgress")->value(), 1000);
        // The cache list was rescanned and shows the downloaded model selected.
        auto* list = child<QListWidget>(&page, "hfCacheModels");
        QTRY_VERIFY_WITH_TIMEOUT(list->currentItem() != nullptr, kWaitMs);
        QCOMPARE(list->currentItem()->text(), QStringLiteral("acme/demo"));
        // A second Check sees everything in the cache.
        child<QPushButton>(&page, "hubCheckButton")->click();
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "hubStatusLabel").contains("already downloaded"), kWaitMs);
    }

    void modelDownloadProgressCancelResume() {
        ModelPage page;
        enterRepo(&page, "slow/model");  // 2 MB at about 200 KB/s
        auto* download = child<QPushButton>(&page, "hubDownloadButton");
        auto* cancel = child<QPushButton>(&page, "hubCancelButton");
        auto* bar = child<QProgressBar>(&page, "hubProgress");
        QVERIFY(!cancel->isEnabled());
        download->click();
        QVERIFY(cancel->isEnabled());
        QVERIFY(!download->isEnabled());
        // Progress with bytes, speed and ETA.
        QTRY_VERIFY_WITH_TIMEOUT(bar->value() > 0 && label(&page, "hubStatusLabel").contains("left"), kWaitMs);
        const QString meter = label(&page, "hubStatusLabel");
        QVERIFY2(meter.contains(" of ") && meter.contains("/s"), qPrintable(meter));
        cancel->click();
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "hubStatusLabel").startsWith("Download cancelled"), kWaitMs);
        QVERIFY(download->isEnabled());
        QCOMPARE(cacheFiles(".incomplete").size(), 1);
        QVERIFY(!QDir(m_cache + "/models--slow--model/snapshots").exists() ||
                cacheFiles("model.safetensors").isEmpty());
        // Download again: continues the .incomplete file with a Range request.
        download->click();
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "hubStatusLabel").startsWith("Downloaded slow/model"), kWaitMs);
        QVERIFY(cacheFiles(".incomplete").isEmpty());
        QVERIFY(fetchLog().contains(QRegularExpression(R"("range": "bytes=[1-9]\d*-")")));
    }

    void modelErrorsInScreenWords() {
        ModelPage page;
        auto* check = child<QPushButton>(&page, "hubCheckButton");
        enterRepo(&page, "gated/model");
        check->click();
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "hubStatusLabel").contains("is gated or private"), kWaitMs);
        QString status = label(&page, "hubStatusLabel");
        QVERIFY2(status.contains("accept its licence") && status.contains("token") &&
                     status.contains(m_tmp.filePath("hf-home/token")),
                 qPrintable(status));
        QVERIFY2(!status.contains("HF_TOKEN") && !status.contains("export ") && !status.contains("--"),
                 qPrintable(status));
        QCOMPARE(child<QLabel>(&page, "hubStatusLabel")->property("tone").toInt(), static_cast<int>(Tone::Bad));

        enterRepo(&page, "nobody/missing");
        check->click();
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "hubStatusLabel").startsWith("No model named nobody/missing"), kWaitMs);
        status = label(&page, "hubStatusLabel");
        QVERIFY2(!status.contains("--dataset"), qPrintable(status));

        enterRepo(&page, "acme/demo@nope");
        check->click();
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "hubStatusLabel").contains("no branch, tag or commit"), kWaitMs);

        enterRepo(&page, "not a repo");
        check->click();
        QVERIFY(label(&page, "hubStatusLabel").contains("is not a Hugging Face repo id"));

        enterRepo(&page, "pickle/model");
        child<QPushButton>(&page, "hubDownloadButton")->click();
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "hubStatusLabel").contains("pickle"), kWaitMs);
        QVERIFY(cacheFiles(QString()).isEmpty());
    }

    void screenWordsForHubMessages() {
        // Unreachable Hub: no environment variable or flag in the studio's message.
        const QString m = hubMessage(ErrorCategory::Io,
                                     "cannot reach http://x for y: refused. Check the network (or a mirror in "
                                     "HF_ENDPOINT); to use only the cache set HF_HUB_OFFLINE=1",
                                     hub::RepoType::Model, "a/b");
        QVERIFY2(m.startsWith("Cannot reach the Hugging Face Hub") && !m.contains("HF_"), qPrintable(m));
        QVERIFY(hubMessage(ErrorCategory::Cancelled, "download cancelled", hub::RepoType::Model, "a/b")
                    .contains("Press Download to continue"));
        QString id, rev;
        QVERIFY(parseRepoSpec(" Qwen/Qwen3-0.6B@v1.0 ", &id, &rev));
        QCOMPARE(id, QStringLiteral("Qwen/Qwen3-0.6B"));
        QCOMPARE(rev, QStringLiteral("v1.0"));
        QVERIFY(parseRepoSpec("org/name", &id, &rev));
        QCOMPARE(rev, QStringLiteral("main"));
        QVERIFY(!parseRepoSpec("org/na--me", &id, &rev));
        QVERIFY(!parseRepoSpec("name-only", &id, &rev));
    }

    // ----- Data page ------------------------------------------------------------------------------------

    void dataDownloadChoosesTheTrainSplit() {
        DataPage page;
        QSignalSpy changed(&page, &DataPage::datasetChanged);
        enterRepo(&page, "acme/splits");
        child<QPushButton>(&page, "hubCheckButton")->click();
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "hubPreviewLabel").contains("2 files"), kWaitMs);
        QVERIFY(child<QLabel>(&page, "hubFitLabel")->isHidden());  // models only
        child<QPushButton>(&page, "hubDownloadButton")->click();
        QTRY_VERIFY_WITH_TIMEOUT(changed.count() >= 1, kWaitMs);
        auto* files = child<QComboBox>(&page, "hubFileCombo");
        QVERIFY(!files->isHidden());
        QCOMPARE(files->count(), 2);  // README.md is no data file
        QCOMPARE(files->currentText(), QStringLiteral("data/train-00000-of-00001.jsonl"));
        QVERIFY(changed.last().at(0).toString().endsWith("/data/train-00000-of-00001.jsonl"));
        QVERIFY(changed.last().at(0).toString().startsWith(m_cache + "/datasets--acme--splits/snapshots/"));
        QCOMPARE(changed.last().at(2).toBool(), true);
        QVERIFY2(label(&page, "recordCountLabel").startsWith("6 records"), qPrintable(label(&page, "recordCountLabel")));
        // Choosing the other split reads it.
        const int test = files->findText(QStringLiteral("data/test-00000-of-00001.jsonl"));
        files->setCurrentIndex(test);
        emit files->activated(test);
        QTRY_VERIFY_WITH_TIMEOUT(changed.last().at(0).toString().endsWith("/data/test-00000-of-00001.jsonl"), kWaitMs);
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "recordCountLabel").startsWith("3 records"), kWaitMs);
    }

    void dataGatedDatasetMessage() {
        DataPage page;
        enterRepo(&page, "nobody/missing");
        child<QPushButton>(&page, "hubCheckButton")->click();
        QTRY_VERIFY_WITH_TIMEOUT(label(&page, "hubStatusLabel").startsWith("No dataset named nobody/missing"),
                                 kWaitMs);
        QVERIFY(label(&page, "hubStatusLabel").contains("Model page"));
    }

    void columnMappingAppliedAndRemembered() {
        const QString csv = m_tmp.filePath(QStringLiteral("qa.csv"));
        writeText(csv, "question,answer,source\nSay hi,hi,a\nSay bye,bye,b\n");
        {
            DataPage page;
            TrainPage train;
            connect(&page, &DataPage::datasetColumns, &train, &TrainPage::setColumns);
            connect(&page, &DataPage::datasetChanged, &train, &TrainPage::setDataset);
            QSignalSpy changed(&page, &DataPage::datasetChanged);
            page.selectDataset(csv);
            // The keys are unknown: the dialog opens by itself, with question/answer pre-chosen.
            ColumnMappingDialog* dialog = nullptr;
            QTRY_VERIFY_WITH_TIMEOUT((dialog = page.findChild<ColumnMappingDialog*>()) != nullptr, kWaitMs);
            QCOMPARE(changed.last().at(2).toBool(), false);
            QVERIFY(label(&page, "recordCountLabel").contains("Map columns"));
            QVERIFY(dialog->isVisible());
            QCOMPARE(child<QComboBox>(dialog, "mappingShapeCombo")->currentIndex(), 0);  // alpaca
            QCOMPARE(child<QComboBox>(dialog, "mapColumn_instruction")->currentText(), QStringLiteral("question"));
            QCOMPARE(child<QComboBox>(dialog, "mapColumn_output")->currentText(), QStringLiteral("answer"));
            // The user says the prompt / completion shape instead.
            child<QComboBox>(dialog, "mappingShapeCombo")->setCurrentIndex(1);
            QCOMPARE(child<QComboBox>(dialog, "mapColumn_prompt")->currentText(), QStringLiteral("question"));
            QCOMPARE(child<QComboBox>(dialog, "mapColumn_completion")->currentText(), QStringLiteral("answer"));
            child<QPushButton>(dialog, "mappingOkButton")->click();
            QTRY_VERIFY_WITH_TIMEOUT(page.datasetValid(), kWaitMs);
            QCOMPARE(child<QLabel>(&page, "detectedFormatLabel")->text(), QStringLiteral("detected: prompt_completion"));
            QVERIFY(label(&page, "columnMappingLabel").contains("prompt ← question"));
            QCOMPARE(changed.last().at(2).toBool(), true);
            // The Train page's run config carries the mapping.
            const RunConfig c = train.config();
            QCOMPARE(c.data.columns.size(), size_t(2));
            QCOMPARE(c.data.columns.at("prompt"), std::string("question"));
            QCOMPARE(c.data.columns.at("completion"), std::string("answer"));
        }
        // Remembered for the file: a new page reads it mapped, no dialog.
        DataPage again;
        again.selectDataset(csv);
        QTRY_VERIFY_WITH_TIMEOUT(again.datasetValid(), kWaitMs);
        QVERIFY(again.findChild<ColumnMappingDialog*>() == nullptr);
        QCOMPARE(again.columns().value("prompt").toString(), QStringLiteral("question"));
        // Clear: the file's own names again (unknown -> not valid), and forgotten.
        child<QPushButton>(&again, "mapColumnsButton")->click();
        ColumnMappingDialog* dialog = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT((dialog = again.findChild<ColumnMappingDialog*>()) != nullptr, kWaitMs);
        child<QPushButton>(dialog, "mappingClearButton")->click();
        QTRY_VERIFY_WITH_TIMEOUT(!again.datasetValid() && label(&again, "recordCountLabel").contains("Map columns"),
                                 kWaitMs);
        QVERIFY(DataPage::rememberedColumns(QDir::cleanPath(csv)).isEmpty());
    }

    void columnMappingForJsonKeys() {
        // JSON Lines with unknown keys: the dialog lists them (dataset_columns) and a text mapping reads it.
        const QString jsonl = m_tmp.filePath(QStringLiteral("stories.jsonl"));
        writeText(jsonl, "{\"story\": \"Once upon a time.\", \"id\": 1}\n{\"story\": \"The end.\", \"id\": 2}\n");
        DataPage page;
        page.selectDataset(jsonl);
        ColumnMappingDialog* dialog = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT((dialog = page.findChild<ColumnMappingDialog*>()) != nullptr, kWaitMs);
        QVERIFY(child<QLabel>(dialog, "mappingIntroLabel")->text().contains("story, id"));
        QCOMPARE(child<QComboBox>(dialog, "mappingShapeCombo")->currentIndex(), 3);  // text
        QCOMPARE(child<QComboBox>(dialog, "mapColumn_text")->currentText(), QStringLiteral("story"));
        child<QPushButton>(dialog, "mappingOkButton")->click();
        QTRY_VERIFY_WITH_TIMEOUT(page.datasetValid(), kWaitMs);
        QCOMPARE(child<QLabel>(&page, "detectedFormatLabel")->text(), QStringLiteral("detected: text"));
        // The dialog's column list for a Parquet file: its top-level columns.
        const auto columns =
            dataset_columns(std::string(TANDEM_FIXTURES_DIR) + "/parquet/alpaca_plain_none_v1.parquet");
        QVERIFY(std::find(columns.begin(), columns.end(), "instruction") != columns.end());
        QVERIFY(std::find(columns.begin(), columns.end(), "output") != columns.end());
    }
};

QTEST_MAIN(TestUiHub)
#include "test_ui_hub.moc"
