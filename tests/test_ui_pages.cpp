// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Model, Data, Train and Runs pages driven the way a user drives them: buttons clicked, fields edited,
// list items double-clicked and table rows selected, and the visible outcome checked (labels, lists, plots,
// button states, signals). The demo model is written into a temporary folder; datasets come from datasets/;
// tiny runs for the Runs page are trained on the CPU (max_steps 2, and one that diverges at lr 1e5).
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDesktopServices>
#include <QDoubleSpinBox>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTimer>
#include <QUrl>

#include <atomic>
#include <filesystem>
#include <fstream>

#include <qcustomplot.h>

#include "tandem/demo_model.h"
#include "tandem/model_config.h"
#include "tandem/run_config.h"
#include "tandem/system_info.h"
#include "tandem/trainer.h"
#include "ui/data_page.h"
#include "ui/hf_cache.h"
#include "ui/length_histogram.h"
#include "ui/model_inspection.h"
#include "ui/model_page.h"
#include "ui/recent_list.h"
#include "ui/runs_page.h"
#include "ui/screen_words.h"
#include "ui/status_text.h"
#include "ui/train_page.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

constexpr int kWaitMs = 60000;

// Whether a combo's item (by its data) can be picked, and its tooltip (why not, when it cannot).
bool itemAllowed(const QComboBox* combo, const char* data) {
    const auto* model = qobject_cast<const QStandardItemModel*>(combo->model());
    const int index = combo->findData(QString::fromLatin1(data));
    return model && index >= 0 && model->item(index)->isEnabled();
}

QString itemTip(const QComboBox* combo, const char* data) {
    return combo->itemData(combo->findData(QString::fromLatin1(data)), Qt::ToolTipRole).toString();
}

QString source(const char* rel) {
    return QString::fromUtf8(TANDEM_SOURCE_DIR) + "/" + rel;
}

void writeText(const QString& path, const QByteArray& text) {
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text);
}

template <typename T>
T* child(QWidget* page, const char* name) {
    T* w = page->findChild<T*>(QString::fromLatin1(name));
    if (!w) qFatal("no widget named %s", name);
    return w;
}

QString fixture(const char* rel) {
    return QString::fromUtf8(TANDEM_FIXTURES_DIR) + "/" + rel;
}

// The bytes of "weights 1.2 MiB" in the Train page's memory line; -1 when it has none.
double weightBytes(const QString& memoryLine) {
    static const QRegularExpression re(R"(weights (\d+(?:\.\d+)?) (KiB|MiB|GiB))");
    const QRegularExpressionMatch m = re.match(memoryLine);
    if (!m.hasMatch()) return -1;
    const QString unit = m.captured(2);
    const double scale = unit == "GiB" ? 1024.0 * 1024 * 1024 : unit == "MiB" ? 1024.0 * 1024 : 1024.0;
    return m.captured(1).toDouble() * scale;
}

// Whether the preview holds text drawn with a background (the trained-token highlight).
bool hasHighlightedText(QTextBrowser* view) {
    for (QTextBlock b = view->document()->begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it)
            if (it.fragment().charFormat().background().style() != Qt::NoBrush &&
                !it.fragment().text().trimmed().isEmpty())
                return true;
    return false;
}

// A user's double click on a list row: press and release, then the double-click event and its release
// (QTest::mouseDClick alone sends only the double-click event, which item views ignore without a press).
void doubleClick(QAbstractItemView* view, const QPoint& pos) {
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, pos);
    QTest::mouseDClick(view->viewport(), Qt::LeftButton, {}, pos);
    QTest::mouseRelease(view->viewport(), Qt::LeftButton, {}, pos);
}

// Answers the next modal message box with `button` as soon as it is shown.
void answerNextMessageBox(QMessageBox::StandardButton button) {
    auto* timer = new QTimer;
    QObject::connect(timer, &QTimer::timeout, timer, [timer, button] {
        if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
            timer->stop();
            timer->deleteLater();
            box->button(button)->click();
        }
    });
    timer->start(20);
}

// Stops the run after its first optimizer step (a user pressing Stop).
class StopAfterFirstStep final : public ProgressSink {
public:
    explicit StopAfterFirstStep(std::atomic<bool>& stop) : m_stop(stop) {}
    void on_step(const StepMetrics&) override { m_stop = true; }

private:
    std::atomic<bool>& m_stop;
};

// Receives the file URLs QDesktopServices would hand to the file manager.
class UrlCatcher : public QObject {
    Q_OBJECT

public:
    QList<QUrl> urls;

public slots:
    void open(const QUrl& url) { urls.append(url); }
};

}  // namespace

class TestUiPages : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_tmp;
    QString m_demo;     // demo model folder
    QString m_hfCache;  // fake Hugging Face hub cache
    QString m_alpaca = source("datasets/demo_alpaca.jsonl");

    void selectReady(TrainPage& page) {
        page.setModel(m_demo, true);
        page.setDataset(m_alpaca, QStringLiteral("auto"), true);
    }

    RunConfig tinyRun(const QString& outDir, int maxSteps) {
        RunConfig c;
        c.model = m_demo.toStdString();
        c.data.dataset = m_alpaca.toStdString();
        c.data.max_seq_len = 256;
        c.training.batch_tokens = 256;
        c.training.max_steps = maxSteps;
        c.device = DeviceChoice::Cpu;
        c.lora.r = 4;
        c.output_dir = outDir.toStdString();
        return c;
    }

private slots:
    void initTestCase() {
        QVERIFY(m_tmp.isValid());
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("Tandem"));
        QCoreApplication::setApplicationName(QStringLiteral("Tandem"));
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, m_tmp.filePath(QStringLiteral("settings")));
        QSettings().clear();
        QSettings().setValue(QStringLiteral("runs/folder"), m_tmp.filePath(QStringLiteral("runs")));
        m_demo = m_tmp.filePath(QStringLiteral("demo-model"));
        create_demo_model(m_demo.toStdString());
        // A hub cache holding the demo model as "acme/tiny-llama" (refs/main -> rev1).
        m_hfCache = m_tmp.filePath(QStringLiteral("hub"));
        const QString snap = m_hfCache + "/models--acme--tiny-llama/snapshots/rev1";
        create_demo_model(snap.toStdString());
        writeText(m_hfCache + "/models--acme--tiny-llama/refs/main", "rev1");
        writeText(m_hfCache + "/models--acme--partial/snapshots/rev9/README.md", "no config.json: not listed");
        qputenv("HF_HUB_CACHE", m_hfCache.toUtf8());
    }

    void init() {
        // Each test starts from the default Train settings, not from the previous test's.
        QSettings().remove(QStringLiteral("train/last"));
    }

    // ----- Model page -----------------------------------------------------------------------------------

    void modelPageDemo() {
        ModelPage page;
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        child<QPushButton>(&page, "demoButton")->click();
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        QCOMPARE(changed.at(0).at(1).toBool(), true);
        QVERIFY(page.modelSupported());
        QVERIFY(QFileInfo::exists(page.modelPath() + "/model.safetensors"));
        QVERIFY(child<QLabel>(&page, "architectureLabel")->text().contains("llama"));
        QCOMPARE(child<QLabel>(&page, "layersLabel")->text(), QStringLiteral("2"));
        QCOMPARE(child<QLabel>(&page, "hiddenSizeLabel")->text(), QStringLiteral("64"));
        QVERIFY(child<QLabel>(&page, "dtypeLabel")->text().contains("BF16"));
        QVERIFY(child<QLabel>(&page, "tokenizerLabel")->text().contains("ids"));
        QCOMPARE(child<QLabel>(&page, "chatTemplateLabel")->text(), QStringLiteral("yes"));
        QVERIFY(child<QLabel>(&page, "modelStatusLabel")->text().startsWith("Supported"));
        QVERIFY(child<QLabel>(&page, "modelStatusLabel")->text().contains("demo"));
    }

    void modelPageFolderGoesToRecent() {
        ModelPage page;
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        page.selectModel(m_demo);
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        QCOMPARE(changed.at(0).at(0).toString(), m_demo);
        auto* recent = child<QListWidget>(&page, "recentModels");
        QVERIFY(recent->count() >= 1);
        QCOMPARE(recent->item(0)->data(Qt::UserRole).toString(), m_demo);
        // A new page lists it too (QSettings model/recent), and a click on it selects it.
        ModelPage again;
        QSignalSpy changedAgain(&again, &ModelPage::modelChanged);
        auto* list = child<QListWidget>(&again, "recentModels");
        QCOMPARE(list->item(0)->data(Qt::UserRole).toString(), m_demo);
        again.show();
        QVERIFY(QTest::qWaitForWindowExposed(&again));
        const QRect r = list->visualItemRect(list->item(0));
        doubleClick(list, r.center());
        QTRY_COMPARE_WITH_TIMEOUT(changedAgain.count(), 1, kWaitMs);
        QCOMPARE(again.modelPath(), m_demo);
    }

    // A double click on a Recent model loads that model, and the list does not reorder under the mouse.
    void modelPageRecentDoubleClickLoadsThatModel() {
        const QString other = m_tmp.filePath(QStringLiteral("other-model"));
        create_demo_model(other.toStdString());
        QSettings().setValue(QStringLiteral("model/recent"), QStringList{m_demo, other});
        ModelPage page;
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        auto* list = child<QListWidget>(&page, "recentModels");
        QCOMPARE(list->count(), 2);
        QCOMPARE(list->item(1)->data(Qt::UserRole).toString(), other);
        QCOMPARE(list->item(1)->toolTip(), QDir::toNativeSeparators(other));  // the full path
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        const QPoint second = list->visualItemRect(list->item(1)).center();
        doubleClick(list, second);
        QTRY_VERIFY_WITH_TIMEOUT(!changed.isEmpty(), kWaitMs);
        QCOMPARE(changed.last().at(0).toString(), other);
        QCOMPARE(page.modelPath(), other);
        // Loaded and remembered first in the settings, but the rows stay where they were.
        QCOMPARE(list->itemAt(second)->data(Qt::UserRole).toString(), other);
        QCOMPARE(list->item(0)->data(Qt::UserRole).toString(), m_demo);
        QCOMPARE(QSettings().value(QStringLiteral("model/recent")).toStringList().first(), other);
        // And the other one, the same way.
        const int before = changed.count();
        doubleClick(list, list->visualItemRect(list->item(0)).center());
        QTRY_VERIFY_WITH_TIMEOUT(changed.count() > before, kWaitMs);
        QCOMPARE(page.modelPath(), m_demo);
        QCOMPARE(list->item(1)->data(Qt::UserRole).toString(), other);
    }

    void modelPageDropFolder() {
        ModelPage page;
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        // A dropped file stands for its folder (dragging config.json out of a file manager).
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(m_demo + "/config.json")});
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&page, &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&page, &drop);
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        QCOMPARE(changed.at(0).at(0).toString(), m_demo);
        QCOMPARE(changed.at(0).at(1).toBool(), true);
        // Text is not a folder: refused.
        QMimeData text;
        text.setText(QStringLiteral("hello"));
        QDragEnterEvent refused(QPoint(10, 10), Qt::CopyAction, &text, Qt::LeftButton, Qt::NoModifier);
        refused.setAccepted(false);
        QApplication::sendEvent(&page, &refused);
        QVERIFY(!refused.isAccepted());
    }

    void modelPageUnknownArchitecture() {
        const QString dir = m_tmp.filePath(QStringLiteral("unknown-arch"));
        writeText(dir + "/config.json",
                  R"({"architectures": ["FooForCausalLM"], "model_type": "foo", "hidden_size": 64,
                      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})");
        ModelPage page;
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        page.selectModel(dir);
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        QCOMPARE(changed.at(0).at(1).toBool(), false);
        QVERIFY(!page.modelSupported());
        const QString status = child<QLabel>(&page, "modelStatusLabel")->text();
        QVERIFY2(status.contains("FooForCausalLM") && status.contains("not supported"), qPrintable(status));
    }

    void modelPagePickleOnly() {
        const QString dir = m_tmp.filePath(QStringLiteral("pickle-only"));
        QDir().mkpath(dir);
        QVERIFY(QFile::copy(m_demo + "/config.json", dir + "/config.json"));
        writeText(dir + "/pytorch_model.bin", "not really a pickle");
        ModelPage page;
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        page.selectModel(dir);
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        QCOMPARE(changed.at(0).at(1).toBool(), false);
        const QString status = child<QLabel>(&page, "modelStatusLabel")->text();
        QVERIFY2(status.contains("pickle"), qPrintable(status));
    }

    // A bitsandbytes 4-bit checkpoint says so (and that it trains as QLoRA); a float model has no such row.
    void modelPageFourBitCheckpoint() {
        ModelPage page;
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        auto* quantization = child<QLabel>(&page, "quantizationLabel");
        QVERIFY(quantization->isHidden());
        page.selectModel(fixture("models/llama-nf4"));
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        QVERIFY(!quantization->isHidden());
        QCOMPARE(quantization->text(),
                 QStringLiteral("4-bit NF4 (bitsandbytes, double quantization): trains as QLoRA"));
        QVERIFY2(child<QLabel>(&page, "dtypeLabel")->text().contains("4-bit nf4"),
                 qPrintable(child<QLabel>(&page, "dtypeLabel")->text()));
        // The fixture has no tokenizer: described, but not trainable, and the page says why.
        QVERIFY(!page.modelSupported());
        QVERIFY(child<QLabel>(&page, "modelStatusLabel")->text().contains("tokenizer.json"));
        page.selectModel(m_demo);
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 2, kWaitMs);
        QVERIFY(page.modelSupported());
        QVERIFY(quantization->isHidden());
        QVERIFY(quantization->text().isEmpty());
        // The words for other layouts.
        WeightQuantization q;
        QCOMPARE(describeQuantization(q, true), QString());  // float weights
        q.prequantized = q.four_bit = true;
        q.quant_type = "fp4";
        q.double_quant = false;
        q.skip_modules = {"lm_head", "mlp.down_proj"};
        QCOMPARE(describeQuantization(q, true),
                 QStringLiteral("4-bit FP4 (bitsandbytes, kept in float: lm_head, mlp.down_proj): trains as QLoRA"));
        QCOMPARE(describeQuantization(q, false), QStringLiteral("4-bit FP4 (bitsandbytes, kept in float: lm_head, "
                                                                "mlp.down_proj)"));
    }

    void modelPageHfCache() {
        ModelPage page;
        auto* list = child<QListWidget>(&page, "hfCacheModels");
        QTRY_COMPARE_WITH_TIMEOUT(list->count(), 1, kWaitMs);  // the partial download is not listed
        QCOMPARE(list->item(0)->text(), QStringLiteral("acme/tiny-llama"));
        QSignalSpy changed(&page, &ModelPage::modelChanged);
        emit list->itemActivated(list->item(0));
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        QVERIFY(changed.at(0).at(0).toString().endsWith("models--acme--tiny-llama/snapshots/rev1"));
        QCOMPARE(changed.at(0).at(1).toBool(), true);
    }

    // ----- Data page ------------------------------------------------------------------------------------

    void dataPageAlpacaWithModel() {
        DataPage page;
        QSignalSpy changed(&page, &DataPage::datasetChanged);
        page.setModel(m_demo);
        page.selectDataset(m_alpaca);
        QTRY_VERIFY_WITH_TIMEOUT(changed.count() >= 1, kWaitMs);
        QCOMPARE(changed.at(0).at(0).toString(), m_alpaca);
        QCOMPARE(changed.at(0).at(1).toString(), QStringLiteral("auto"));
        QCOMPARE(changed.at(0).at(2).toBool(), true);
        QVERIFY(page.datasetValid());
        QVERIFY(child<QLabel>(&page, "recordCountLabel")->text().startsWith("60 records: 60 valid, 0 invalid"));
        QCOMPARE(child<QLabel>(&page, "detectedFormatLabel")->text(), QStringLiteral("detected: alpaca"));
        QCOMPARE(child<QListWidget>(&page, "invalidList")->count(), 0);

        auto* histogram = child<LengthHistogram>(&page, "lengthHistogram");
        QTRY_VERIFY_WITH_TIMEOUT(histogram->bars()->data()->size() > 0, kWaitMs);
        double samples = 0;
        for (auto it = histogram->bars()->data()->constBegin(); it != histogram->bars()->data()->constEnd(); ++it)
            samples += it->value;
        QCOMPARE(samples, 60.0);  // one sample per alpaca record
        QVERIFY(histogram->cutoffLine()->visible());
        QCOMPARE(histogram->cutoffLine()->point1->key(), 2048.0);

        auto* preview = child<QTextBrowser>(&page, "previewView");
        QVERIFY(hasHighlightedText(preview));
        QVERIFY(preview->toPlainText().contains("Fernlight PW-2"));
        const QString first = preview->toPlainText();
        child<QSpinBox>(&page, "sampleSpin")->setValue(2);
        QVERIFY(preview->toPlainText() != first);
        QVERIFY(hasHighlightedText(preview));

        auto* packing = child<QLabel>(&page, "packingLabel");
        QTRY_VERIFY_WITH_TIMEOUT(packing->text().startsWith("Packing efficiency"), kWaitMs);
        // A tighter limit: the cut-off line moves, samples get truncated, the efficiency is recomputed.
        page.setLimits(64, 256, true);
        QCOMPARE(histogram->cutoffLine()->point1->key(), 64.0);
        QTRY_VERIFY_WITH_TIMEOUT(packing->text().contains("truncated"), kWaitMs);
        QVERIFY2(QRegularExpression(R"(Packing efficiency \d+\.\d%: \d+ micro-batches of 256 tokens)")
                     .match(packing->text())
                     .hasMatch(),
                 qPrintable(packing->text()));
        page.setLimits(256, 4096, false);
        QTRY_VERIFY_WITH_TIMEOUT(packing->text().startsWith("Packing off"), kWaitMs);
    }

    // The issue's case: a double click on the second Recent dataset must load that dataset (not load it on the
    // first click, move it to the top and let the second click land on the other one).
    void dataPageRecentDoubleClickLoadsThatItem() {
        const QString chat = source("datasets/demo_chat.jsonl");
        QSettings().setValue(QStringLiteral("data/recent"), QStringList{m_alpaca, chat});
        DataPage page;
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        auto* list = child<QListWidget>(&page, "recentDatasets");
        QCOMPARE(list->count(), 2);
        QCOMPARE(list->item(0)->text(), QStringLiteral("demo_alpaca.jsonl"));
        QCOMPARE(list->item(1)->toolTip(), QDir::toNativeSeparators(chat));  // the full path
        QSignalSpy changed(&page, &DataPage::datasetChanged);
        const QPoint second = list->visualItemRect(list->item(1)).center();
        doubleClick(list, second);
        QTRY_VERIFY_WITH_TIMEOUT(!changed.isEmpty(), kWaitMs);
        QCOMPARE(changed.last().at(0).toString(), chat);
        QCOMPARE(page.datasetPath(), chat);
        QCOMPARE(list->itemAt(second)->data(Qt::UserRole).toString(), chat);  // not reordered under the mouse
        QCOMPARE(list->currentItem()->data(Qt::UserRole).toString(), chat);
        QCOMPARE(QSettings().value(QStringLiteral("data/recent")).toStringList().first(), chat);
        // Double-clicking the first row now loads the first row's dataset.
        const int before = changed.count();
        doubleClick(list, list->visualItemRect(list->item(0)).center());
        QTRY_VERIFY_WITH_TIMEOUT(changed.count() > before, kWaitMs);
        QCOMPARE(page.datasetPath(), m_alpaca);
        QCOMPARE(list->item(1)->data(Qt::UserRole).toString(), chat);
        // A dataset chosen elsewhere (not in the list) is added at the top.
        const QString copy = m_tmp.filePath(QStringLiteral("copy.jsonl"));
        QVERIFY(QFile::copy(m_alpaca, copy));
        page.selectDataset(copy);
        QTRY_COMPARE_WITH_TIMEOUT(list->count(), 3, kWaitMs);
        QCOMPARE(list->item(0)->data(Qt::UserRole).toString(), copy);
    }

    void dataPageWithoutModel() {
        DataPage page;
        QSignalSpy changed(&page, &DataPage::datasetChanged);
        page.selectDataset(source("datasets/demo_chat.jsonl"));
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        QCOMPARE(changed.at(0).at(2).toBool(), true);
        QVERIFY(child<QLabel>(&page, "recordCountLabel")->text().startsWith("20 records"));
        QCOMPARE(child<QLabel>(&page, "detectedFormatLabel")->text(), QStringLiteral("detected: chat"));
        QVERIFY(child<QLabel>(&page, "sampleInfoLabel")->text().contains("need a model"));
        QCOMPARE(child<LengthHistogram>(&page, "lengthHistogram")->bars()->data()->size(), 0);
        // The model arrives later: the preview appears without selecting the dataset again.
        page.setModel(m_demo);
        QTRY_VERIFY_WITH_TIMEOUT(hasHighlightedText(child<QTextBrowser>(&page, "previewView")), kWaitMs);
    }

    void dataPageBrokenLines() {
        QByteArray text;
        for (int line = 1; line <= 10; ++line) {
            if (line == 3)
                text += "{\"instruction\": \"cut off\", \"output\": \n";
            else if (line == 7)
                text += "this is not json\n";
            else
                text += "{\"instruction\": \"Say " + QByteArray::number(line) + "\", \"output\": \"ok\"}\n";
        }
        const QString path = m_tmp.filePath(QStringLiteral("broken.jsonl"));
        writeText(path, text);
        DataPage page;
        QSignalSpy changed(&page, &DataPage::datasetChanged);
        page.selectDataset(path);
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        // 2 of 10 invalid is more than the 10% training accepts.
        QCOMPARE(changed.at(0).at(2).toBool(), false);
        QVERIFY(!page.datasetValid());
        auto* invalid = child<QListWidget>(&page, "invalidList");
        QCOMPARE(invalid->count(), 2);
        QVERIFY2(invalid->item(0)->text().startsWith("line 3: json_syntax"), qPrintable(invalid->item(0)->text()));
        QVERIFY2(invalid->item(1)->text().startsWith("line 7: json_syntax"), qPrintable(invalid->item(1)->text()));
        const QString records = child<QLabel>(&page, "recordCountLabel")->text();
        QVERIFY2(records.contains("10 records: 8 valid, 2 invalid") && records.contains("more than 10%"),
                 qPrintable(records));
    }

    void dataPageFormatOverride() {
        DataPage page;
        QSignalSpy changed(&page, &DataPage::datasetChanged);
        page.selectDataset(m_alpaca);
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 1, kWaitMs);
        auto* combo = child<QComboBox>(&page, "formatCombo");
        // Forcing the wrong format: every record lacks the chat keys, the dataset is refused.
        combo->setCurrentIndex(combo->findData(QStringLiteral("chat")));
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 2, kWaitMs);
        QCOMPARE(changed.at(1).at(1).toString(), QStringLiteral("chat"));
        QCOMPARE(changed.at(1).at(2).toBool(), false);
        QCOMPARE(page.format(), QStringLiteral("chat"));
        QVERIFY(child<QListWidget>(&page, "invalidList")->count() > 0 ||
                !child<QLabel>(&page, "recordCountLabel")->text().isEmpty());
        // The right one, forced.
        combo->setCurrentIndex(combo->findData(QStringLiteral("alpaca")));
        QTRY_COMPARE_WITH_TIMEOUT(changed.count(), 3, kWaitMs);
        QCOMPARE(changed.at(2).at(1).toString(), QStringLiteral("alpaca"));
        QCOMPARE(changed.at(2).at(2).toBool(), true);
        QCOMPARE(child<QLabel>(&page, "detectedFormatLabel")->text(), QStringLiteral("forced: alpaca"));
    }

    // ----- Train page -----------------------------------------------------------------------------------

    void trainPagePreset() {
        TrainPage page;
        auto* preset = child<QComboBox>(&page, "presetCombo");
        QCOMPARE(preset->count(), 4);  // custom + the three presets
        QCOMPARE(preset->itemText(1), QStringLiteral("Quick test"));
        preset->setCurrentIndex(preset->findText(QStringLiteral("Quick test")));
        QCOMPARE(child<QSpinBox>(&page, "rankSpin")->value(), 8);
        QCOMPARE(child<QSpinBox>(&page, "maxStepsSpin")->value(), 20);
        QCOMPARE(child<QSpinBox>(&page, "maxSeqLenSpin")->value(), 512);
        QCOMPARE(page.config().training.batch_tokens, 1024);
        QVERIFY(!child<QSpinBox>(&page, "epochsSpin")->isEnabled());  // max steps wins
        preset->setCurrentIndex(preset->findText(QStringLiteral("Max quality")));
        QCOMPARE(child<QSpinBox>(&page, "rankSpin")->value(), 64);
        QVERIFY(child<QCheckBox>(&page, "rsloraCheck")->isChecked());
        QCOMPARE(child<QComboBox>(&page, "scheduleCombo")->currentText(), QStringLiteral("cosine"));
        QCOMPARE(page.config().training.epochs, 3);
        // A hand edit leaves the preset.
        child<QSpinBox>(&page, "rankSpin")->setValue(32);
        QCOMPARE(preset->currentIndex(), 0);
    }

    // The target boxes are the model's own projections: Phi-3's fused qkv_proj / gate_up_proj instead of the
    // seven Llama names, with the checked names carried over (all of q/k/v checked -> qkv_proj checked).
    void trainPageTargetsFollowTheModel() {
        TrainPage page;
        auto shown = [&] {
            QStringList names;
            for (auto* check : child<QWidget>(&page, "targetsBox")->findChildren<QCheckBox*>())
                if (!check->isHidden()) names.append(check->text());
            names.sort();
            return names;
        };
        QCOMPARE(shown(), (QStringList{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}));
        child<QCheckBox>(&page, "target_gate_proj")->setChecked(false);
        page.setModel(QString::fromUtf8(TANDEM_FIXTURES_DIR "/models/phi3"), true);
        QCOMPARE(shown(), (QStringList{"down_proj", "gate_up_proj", "o_proj", "qkv_proj"}));
        QVERIFY(child<QCheckBox>(&page, "target_qkv_proj")->isChecked());
        QVERIFY(!child<QCheckBox>(&page, "target_gate_up_proj")->isChecked());  // gate_proj was unchecked
        QCOMPARE(page.config().lora.target_modules, (std::vector<std::string>{"qkv_proj", "o_proj", "down_proj"}));
        // Back to a Llama-family model: the fused names map to nothing there; the seven boxes come back.
        page.setModel(QString::fromUtf8(TANDEM_FIXTURES_DIR "/models/gemma3"), true);
        QCOMPARE(shown(), (QStringList{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}));
        QVERIFY(child<QCheckBox>(&page, "target_o_proj")->isChecked());
        QVERIFY(child<QCheckBox>(&page, "target_k_proj")->isChecked());  // from qkv_proj
        QVERIFY(!child<QCheckBox>(&page, "target_up_proj")->isChecked());
        // A mixture of experts: the attention and the experts' two parameters (the dense MLP names stand for them),
        // the up box still unchecked -> the experts' gate_up unchecked too.
        child<QCheckBox>(&page, "target_gate_proj")->setChecked(true);
        page.setModel(QString::fromUtf8(TANDEM_FIXTURES_DIR "/models/qwen3-moe"), true);
        QCOMPARE(shown(), (QStringList{"experts: down_proj", "experts: gate_up_proj", "k_proj", "o_proj", "q_proj",
                                       "v_proj"}));
        QVERIFY(!child<QCheckBox>(&page, "target_mlp.experts.gate_up_proj")->isChecked());
        QVERIFY(child<QCheckBox>(&page, "target_mlp.experts.down_proj")->isChecked());
        child<QCheckBox>(&page, "target_mlp.experts.gate_up_proj")->setChecked(true);
        QCOMPARE(page.config().lora.target_modules,
                 (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "mlp.experts.gate_up_proj",
                                           "mlp.experts.down_proj"}));
    }

    // The GUI hides smart-single (a measurement aid; the CLI keeps it) and cuda when no GPU is usable.
    void trainPageHidesSmartSingleAndUnusableCuda() {
        TrainPage page;
        auto* checkpointing = child<QComboBox>(&page, "checkpointingCombo");
        QStringList policies;
        for (int i = 0; i < checkpointing->count(); ++i) policies << checkpointing->itemData(i).toString();
        QCOMPARE(policies, (QStringList{"auto", "off", "selective", "recompute", "smart"}));
        auto* device = child<QComboBox>(&page, "deviceCombo");
        const SystemInfo info = system_info();
        if (info.gpu_usable) {
            QVERIFY(device->findData(QStringLiteral("cuda")) >= 0);
        } else {  // the page asks system_info off the GUI thread
            QTRY_VERIFY_WITH_TIMEOUT(device->findData(QStringLiteral("cuda")) < 0, kWaitMs);
            QVERIFY(device->toolTip().contains(QString::fromStdString(info.gpu_unavailable_reason)));
        }
        page.setGpuAvailable(true, {});
        QVERIFY(device->findData(QStringLiteral("cuda")) >= 0);
        device->setCurrentIndex(device->findData(QStringLiteral("cuda")));
        page.setGpuAvailable(false, QStringLiteral("no NVIDIA driver"));
        QCOMPARE(device->findData(QStringLiteral("cuda")), -1);
        QCOMPARE(device->currentData().toString(), QStringLiteral("auto"));
        QVERIFY(device->toolTip().contains("no NVIDIA driver"));
        QCOMPARE(page.config().device, DeviceChoice::Auto);
        // A reopened config naming either shows auto; the other settings come through.
        RunConfig c = tinyRun(m_tmp.filePath(QStringLiteral("runs/x")), 3);
        c.device = DeviceChoice::Cuda;
        c.memory.checkpointing = CheckpointPolicy::SmartSingle;
        page.setConfig(c);
        QCOMPARE(device->currentData().toString(), QStringLiteral("auto"));
        QCOMPARE(checkpointing->currentData().toString(), QStringLiteral("auto"));
        QCOMPARE(page.config().training.max_steps, int64_t(3));
    }

    // Several GPUs: a checkable list picks the GPUs of a data-parallel run (RunConfig::devices); GPU 0 alone is the
    // default (no devices written); the last checked GPU cannot be unchecked; the CPU takes none; one GPU hides it.
    void trainPageListsGpusToTrainOnTogether() {
        TrainPage page;
        QSignalSpy checked(&page, &TrainPage::gpuChecked);
        QTRY_VERIFY_WITH_TIMEOUT(checked.count() == 1, kWaitMs);  // system_info's own list first
        auto* list = child<QListWidget>(&page, "gpuList");
        auto* help = child<QLabel>(&page, "gpuHelp");
        auto* accum = child<QSpinBox>(&page, "gradAccumSpin");
        auto* device = child<QComboBox>(&page, "deviceCombo");
        page.setGpuAvailable(true, {});
        page.setGpuList({{0, "GPU 0: A, 80 GiB"}, {1, "GPU 1: B, 80 GiB"}, {2, "GPU 2: C, 24 GiB"}});
        QCOMPARE(list->count(), 3);
        QVERIFY(list->parentWidget()->isVisibleTo(&page));
        QCOMPARE(list->item(0)->checkState(), Qt::Checked);
        QVERIFY(page.config().devices.empty());
        accum->setValue(1);
        list->item(2)->setCheckState(Qt::Checked);
        QCOMPARE(page.config().devices, (std::vector<int>{0, 2}));
        QVERIFY2(help->text().contains("1 GPUs wait"), qPrintable(help->text()));
        accum->setValue(4);
        QVERIFY2(help->text().startsWith("2 GPUs"), qPrintable(help->text()));
        list->item(0)->setCheckState(Qt::Unchecked);
        list->item(2)->setCheckState(Qt::Unchecked);  // the last one: undone
        QCOMPARE(list->item(2)->checkState(), Qt::Checked);
        QCOMPARE(page.config().devices, (std::vector<int>{2}));
        device->setCurrentIndex(device->findData(QStringLiteral("cpu")));
        QVERIFY(page.config().devices.empty());
        QVERIFY(!list->isEnabled());
        device->setCurrentIndex(device->findData(QStringLiteral("auto")));
        // A reopened run's GPUs are checked again.
        RunConfig c = page.config();
        c.devices = {1, 2};
        page.setConfig(c);
        QCOMPARE(list->item(0)->checkState(), Qt::Unchecked);
        QCOMPARE(list->item(1)->checkState(), Qt::Checked);
        QCOMPARE(page.config().devices, (std::vector<int>{1, 2}));
        // A config naming only GPUs this machine lacks: the first one checked, and said so.
        c.devices = {5};
        page.setConfig(c);
        QCOMPARE(list->item(0)->checkState(), Qt::Checked);
        QVERIFY(page.config().devices.empty());
        QVERIFY2(help->text().startsWith("One GPU"), qPrintable(help->text()));
        // CUDA's indices, not the rows: a GPU system_info could not read leaves a gap.
        page.setGpuList({{0, "GPU 0: A, 80 GiB"}, {2, "GPU 2: C, 24 GiB"}});
        list->item(1)->setCheckState(Qt::Checked);
        QCOMPARE(page.config().devices, (std::vector<int>{0, 2}));
        page.setGpuList({{0, "GPU 0: A, 80 GiB"}});
        QVERIFY(!list->parentWidget()->isVisibleTo(&page));
        QVERIFY(page.config().devices.empty());  // GPU 2 is gone: GPU 0, the default
    }

    // A runs folder that cannot hold a run folder blocks Train with what to do (not an internal error later).
    void trainPageUnwritableRunsFolderBlocksTrain() {
        TrainPage page;
        selectReady(page);
        auto* train = child<QPushButton>(&page, "trainButton");
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
        const QString file = m_tmp.filePath(QStringLiteral("a-file"));
        writeText(file, "not a folder");
        auto* runs = child<QLineEdit>(&page, "runsFolderEdit");
        const QString before = runs->text();
        runs->setText(file + QStringLiteral("/runs"));
        QVERIFY(!train->isEnabled());
        const QString blocked = child<QLabel>(&page, "trainBlockedLabel")->text();
        QVERIFY2(blocked.contains("choose a writable runs folder"), qPrintable(blocked));
        QVERIFY(runs->property("invalid").toBool());
        runs->setText(before);
        QVERIFY(!runs->property("invalid").toBool());
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
    }

    // Reopened settings whose model and dataset are the ones selected through symlinks keep Train available.
    void trainPageReopenKeepsTheSameFolderThroughASymlink() {
        const QString link = m_tmp.filePath(QStringLiteral("demo-link"));
        QVERIFY(QFile::link(m_demo, link));
        const QString dataLink = m_tmp.filePath(QStringLiteral("alpaca-link.jsonl"));
        QVERIFY(QFile::link(m_alpaca, dataLink));
        TrainPage page;
        page.setModel(link, true);
        page.setDataset(dataLink, QStringLiteral("auto"), true);
        auto* train = child<QPushButton>(&page, "trainButton");
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
        RunConfig c = tinyRun(m_tmp.filePath(QStringLiteral("runs/old")), 5);
        c.model = QFileInfo(m_demo).canonicalFilePath().toStdString();  // config.json holds resolved paths
        c.data.dataset = QFileInfo(m_alpaca).canonicalFilePath().toStdString();
        page.setConfig(c);
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
        QCOMPARE(page.config().model, link.toStdString());
        QCOMPARE(page.config().training.max_steps, int64_t(5));
        // Another model is not confirmed until the Model page says so.
        c.model = m_tmp.filePath(QStringLiteral("unknown-arch")).toStdString();
        page.setConfig(c);
        QVERIFY(!train->isEnabled());
        QVERIFY(train->toolTip().contains("Model page"));
    }

    void trainPageExplanationsFollowToggles() {
        TrainPage page;
        auto* help = child<QLabel>(&page, "checkpointingHelp");
        auto* combo = child<QComboBox>(&page, "checkpointingCombo");
        for (const char* policy : {"auto", "off", "recompute", "smart"}) {
            combo->setCurrentIndex(combo->findText(QString::fromLatin1(policy)));
            QVERIFY2(help->text().startsWith(QString::fromLatin1(policy), Qt::CaseInsensitive),
                     qPrintable(help->text()));
        }
        auto* packing = child<QCheckBox>(&page, "packingCheck");
        packing->setChecked(true);
        QVERIFY(child<QLabel>(&page, "packingHelp")->text().startsWith("Packing on"));
        packing->setChecked(false);
        QVERIFY(child<QLabel>(&page, "packingHelp")->text().startsWith("Packing off"));
    }

    void trainPageInvalidFieldBlocksTrain() {
        TrainPage page;
        selectReady(page);
        auto* train = child<QPushButton>(&page, "trainButton");
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);

        auto* lr = child<QLineEdit>(&page, "lrEdit");
        lr->setText(QStringLiteral("fast"));
        QVERIFY(!train->isEnabled());
        QVERIFY(lr->property("invalid").toBool());
        QVERIFY(lr->styleSheet().contains("border"));
        QVERIFY(lr->toolTip().contains("not a number"));
        QVERIFY(train->toolTip().contains("Learning rate"));
        QVERIFY(child<QLabel>(&page, "trainBlockedLabel")->text().contains("Learning rate"));

        lr->setText(QStringLiteral("-1e-4"));  // a number, but the engine's validation refuses it
        QVERIFY(!train->isEnabled());
        QVERIFY(lr->property("invalid").toBool());
        // In the page's words: the field's label, not the config key.
        QCOMPARE(lr->toolTip(), QStringLiteral("Learning rate: -0.0001 must be a positive number"));
        QVERIFY(!child<QLabel>(&page, "trainBlockedLabel")->text().contains("training."));

        lr->setText(QStringLiteral("1e-4"));
        QVERIFY(!lr->property("invalid").toBool());
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);

        // A micro-batch smaller than a sample: both fields involved are marked.
        child<QSpinBox>(&page, "maxSeqLenSpin")->setValue(1024);
        child<QSpinBox>(&page, "batchTokensSpin")->setValue(512);
        QVERIFY(!train->isEnabled());
        QVERIFY(child<QSpinBox>(&page, "batchTokensSpin")->property("invalid").toBool());
        QVERIFY(child<QSpinBox>(&page, "maxSeqLenSpin")->property("invalid").toBool());
        child<QSpinBox>(&page, "batchTokensSpin")->setValue(2048);
        QVERIFY(!child<QSpinBox>(&page, "maxSeqLenSpin")->property("invalid").toBool());

        // No LoRA target at all.
        for (const char* t : {"target_q_proj", "target_k_proj", "target_v_proj", "target_o_proj", "target_gate_proj",
                              "target_up_proj", "target_down_proj"})
            child<QCheckBox>(&page, t)->setChecked(false);
        QVERIFY(!train->isEnabled());
        QVERIFY(child<QWidget>(&page, "targetsBox")->property("invalid").toBool());
    }

    void trainPageBlockedWithoutModelOrData() {
        TrainPage page;
        auto* train = child<QPushButton>(&page, "trainButton");
        QVERIFY(!train->isEnabled());
        QVERIFY(train->toolTip().contains("model"));
        page.setModel(m_demo, false);
        QVERIFY(!train->isEnabled());
        QVERIFY(train->toolTip().contains("cannot be trained"));
        page.setModel(m_demo, true);
        QVERIFY(train->toolTip().contains("dataset"));
        page.setDataset(m_alpaca, QStringLiteral("auto"), false);
        QVERIFY(train->toolTip().contains("problems"));
        page.setDataset(m_alpaca, QStringLiteral("auto"), true);
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
        page.setRunning(true);
        QVERIFY(!train->isEnabled());
        page.setRunning(false);
        QVERIFY(train->isEnabled());
    }

    void trainPageConfigRoundTrip() {
        TrainPage page;
        selectReady(page);
        child<QSpinBox>(&page, "rankSpin")->setValue(4);
        child<QDoubleSpinBox>(&page, "alphaSpin")->setValue(8);
        child<QDoubleSpinBox>(&page, "dropoutSpin")->setValue(0.1);
        child<QCheckBox>(&page, "rsloraCheck")->setChecked(true);
        child<QCheckBox>(&page, "target_k_proj")->setChecked(false);
        child<QCheckBox>(&page, "target_up_proj")->setChecked(false);
        child<QLineEdit>(&page, "lrEdit")->setText(QStringLiteral("3e-4"));
        auto* schedule = child<QComboBox>(&page, "scheduleCombo");
        schedule->setCurrentIndex(schedule->findText(QStringLiteral("cosine")));
        child<QSpinBox>(&page, "warmupSpin")->setValue(5);
        child<QSpinBox>(&page, "epochsSpin")->setValue(2);
        child<QSpinBox>(&page, "maxStepsSpin")->setValue(7);
        child<QSpinBox>(&page, "batchTokensSpin")->setValue(512);
        child<QSpinBox>(&page, "gradAccumSpin")->setValue(2);
        child<QSpinBox>(&page, "maxSeqLenSpin")->setValue(256);
        child<QSpinBox>(&page, "seedSpin")->setValue(7);
        auto* device = child<QComboBox>(&page, "deviceCombo");
        device->setCurrentIndex(device->findText(QStringLiteral("cpu")));
        child<QCheckBox>(&page, "packingCheck")->setChecked(false);
        auto* ckpt = child<QComboBox>(&page, "checkpointingCombo");
        ckpt->setCurrentIndex(ckpt->findText(QStringLiteral("recompute")));
        auto* quantization = child<QComboBox>(&page, "quantizationCombo");
        quantization->setCurrentIndex(quantization->findData(QStringLiteral("nf4")));
        auto* minutes = child<QDoubleSpinBox>(&page, "checkpointMinutesSpin");
        QCOMPARE(minutes->value(), 10.0);  // the default: a crash loses at most 10 minutes
        minutes->setValue(2.5);

        RunConfig c = page.config();
        QCOMPARE(c.model, m_demo.toStdString());
        QCOMPARE(c.data.dataset, m_alpaca.toStdString());
        QCOMPARE(c.lora.r, 4);
        QCOMPARE(c.lora.alpha, 8.0);
        QCOMPARE(c.lora.dropout, 0.1);
        QVERIFY(c.lora.use_rslora);
        QCOMPARE(c.lora.target_modules,
                 (std::vector<std::string>{"q_proj", "v_proj", "o_proj", "gate_proj", "down_proj"}));
        QCOMPARE(c.training.lr, 3e-4);
        QCOMPARE(c.training.schedule, LrSchedule::Cosine);
        QCOMPARE(c.training.warmup_steps, int64_t(5));
        QCOMPARE(c.training.epochs, int64_t(2));
        QCOMPARE(c.training.max_steps, int64_t(7));
        QCOMPARE(c.training.batch_tokens, 512);
        QCOMPARE(c.training.grad_accum, 2);
        QCOMPARE(c.data.max_seq_len, 256);
        QVERIFY(!c.data.packing);
        QCOMPARE(c.seed, uint64_t(7));
        QCOMPARE(c.device, DeviceChoice::Cpu);
        QCOMPARE(c.memory.checkpointing, CheckpointPolicy::Recompute);
        QCOMPARE(c.quantization, Quantization::Nf4);
        QCOMPARE(c.training.checkpoint_minutes, 2.5);
        minutes->setValue(0);  // off
        QCOMPARE(page.config().training.checkpoint_minutes, 0.0);
        minutes->setValue(2.5);
        // output_dir: a new folder under the runs folder, named after the time and the model.
        const QString out = QString::fromStdString(c.output_dir);
        QVERIFY2(out.startsWith(m_tmp.filePath(QStringLiteral("runs")) + "/") && out.endsWith("-demo-model"),
                 qPrintable(out));
        QVERIFY(QRegularExpression(R"(/\d{8}-\d{6}-demo-model$)").match(out).hasMatch());

        // Settings without a widget survive the trip too.
        c.training.warmup_ratio = 0.1;
        c.training.eval_every = 5;
        c.training.checkpoint_every = 3;
        c.training.keep_checkpoints = 5;
        c.data.validation_fraction = 0.2;
        c.memory.vram_budget_gib = 20;
        c.memory.host_budget_gib = 100;  // the "Pinned host memory" box

        // Into a page whose fields all differ, and back.
        TrainPage other;
        selectReady(other);
        other.setConfig(c);
        QCOMPARE(child<QSpinBox>(&other, "rankSpin")->value(), 4);
        QCOMPARE(child<QDoubleSpinBox>(&other, "checkpointMinutesSpin")->value(), 2.5);
        QVERIFY(!child<QCheckBox>(&other, "target_k_proj")->isChecked());
        RunConfig back = other.config();
        back.output_dir.clear();
        c.output_dir.clear();
        QVERIFY(back == c);

        // A value the box shows rounded (2 decimals) survives the trip exactly until the box is changed.
        c.training.checkpoint_minutes = 1e-6;
        other.setConfig(c);
        back = other.config();
        back.output_dir.clear();
        QVERIFY(back == c);
        child<QDoubleSpinBox>(&other, "checkpointMinutesSpin")->setValue(15);
        QCOMPARE(other.config().training.checkpoint_minutes, 15.0);
        // The pinned host memory box shows the config's value and sets it; 0 is "auto (half the RAM)".
        auto* host = child<QDoubleSpinBox>(&other, "hostBudgetSpin");
        QCOMPARE(host->value(), 100.0);
        host->setValue(64);
        QCOMPARE(other.config().memory.host_budget_gib, 64.0);
        host->setValue(0);
        QCOMPARE(other.config().memory.host_budget_gib, 0.0);
        QVERIFY(host->text().contains(QStringLiteral("auto")));
    }

    void trainPageMemoryEstimate() {
        TrainPage page;
        auto* label = child<QLabel>(&page, "memoryLabel");
        QVERIFY(!label->text().contains(QRegularExpression(R"(\d)")));
        page.setModel(m_demo, true);
        const QRegularExpression bytes(R"(Estimated peak \d+(\.\d+)? (KiB|MiB|GiB) of \d+(\.\d+)? (KiB|MiB|GiB))");
        QTRY_VERIFY_WITH_TIMEOUT(bytes.match(label->text()).hasMatch(), kWaitMs);
        auto* bar = child<QProgressBar>(&page, "memoryBar");
        QVERIFY(bar->format().contains("/"));
        // A bigger batch needs more activation memory: the estimate follows the setting.
        const QString before = label->text();
        child<QSpinBox>(&page, "batchTokensSpin")->setValue(65536);
        QTRY_VERIFY_WITH_TIMEOUT(label->text() != before && bytes.match(label->text()).hasMatch(), kWaitMs);
    }

    // Base weights: 16-bit or 4-bit (QLoRA), into config() and back, with its explanation.
    void trainPageBaseWeightsChoice() {
        TrainPage page;
        auto* combo = child<QComboBox>(&page, "quantizationCombo");
        auto* help = child<QLabel>(&page, "quantizationHelp");
        QCOMPARE(combo->count(), 2);
        QCOMPARE(combo->currentText(), QStringLiteral("16-bit (as stored)"));
        QVERIFY(combo->isEnabled());
        QCOMPARE(page.config().quantization, Quantization::None);
        QVERIFY2(help->text().startsWith("16-bit"), qPrintable(help->text()));
        combo->setCurrentIndex(combo->findText(QStringLiteral("4-bit (QLoRA)")));
        QCOMPARE(page.config().quantization, Quantization::Nf4);
        QVERIFY2(help->text().startsWith("4-bit (QLoRA)") && help->text().contains("quarter") &&
                     help->text().contains("PEFT"),
                 qPrintable(help->text()));
        // Into another page and back; and back to 16-bit there.
        TrainPage other;
        QCOMPARE(other.config().quantization, Quantization::None);
        other.setConfig(page.config());
        auto* otherCombo = child<QComboBox>(&other, "quantizationCombo");
        QCOMPARE(otherCombo->currentData().toString(), QStringLiteral("nf4"));
        QCOMPARE(other.config().quantization, Quantization::Nf4);
        otherCombo->setCurrentIndex(otherCombo->findData(QStringLiteral("none")));
        QCOMPARE(other.config().quantization, Quantization::None);
    }

    // The estimate follows the choice: 4-bit projections need less memory for the weights.
    void trainPageFourBitEstimateIsSmaller() {
        TrainPage page;
        page.setModel(m_demo, true);
        auto* label = child<QLabel>(&page, "memoryLabel");
        QTRY_VERIFY_WITH_TIMEOUT(weightBytes(label->text()) > 0, kWaitMs);
        const double float16 = weightBytes(label->text());
        const QString barBefore = child<QProgressBar>(&page, "memoryBar")->format();
        auto* combo = child<QComboBox>(&page, "quantizationCombo");
        combo->setCurrentIndex(combo->findData(QStringLiteral("nf4")));
        QTRY_VERIFY_WITH_TIMEOUT(weightBytes(label->text()) > 0 && weightBytes(label->text()) != float16, kWaitMs);
        const double fourBit = weightBytes(label->text());
        QVERIFY2(fourBit < float16, qPrintable(QStringLiteral("%1 -> %2").arg(float16).arg(fourBit)));
        QVERIFY(child<QProgressBar>(&page, "memoryBar")->format() != barBefore);
        // And back.
        combo->setCurrentIndex(combo->findData(QStringLiteral("none")));
        QTRY_COMPARE_WITH_TIMEOUT(weightBytes(label->text()), float16, kWaitMs);
    }

    // A model far too big for this machine's RAM (a 405B-like config.json; the estimate reads nothing else): the
    // estimate points to 4-bit weights, the longest-sample line says nothing fits.
    void trainPageTooBigPointsToFourBit() {
        const QString dir = m_tmp.filePath(QStringLiteral("huge-config"));
        writeText(dir + "/config.json",
                  R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16384,
                      "intermediate_size": 53248, "num_hidden_layers": 126, "num_attention_heads": 128,
                      "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 4096,
                      "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16"})");
        TrainPage page;
        auto* device = child<QComboBox>(&page, "deviceCombo");
        device->setCurrentIndex(device->findData(QStringLiteral("cpu")));  // RAM: no machine here holds 1.6 TB
        page.setModel(dir, true);
        auto* label = child<QLabel>(&page, "memoryLabel");
        QTRY_VERIFY_WITH_TIMEOUT(weightBytes(label->text()) > 0, kWaitMs);
        QVERIFY2(label->text().contains("does not fit"), qPrintable(label->text()));
        QVERIFY2(label->text().contains("Base weights: 4-bit (QLoRA)"), qPrintable(label->text()));
        auto* longest = child<QLabel>(&page, "longestContextLabel");
        QTRY_VERIFY_WITH_TIMEOUT(longest->text().contains("none: not even 64 tokens fit in host memory"), kWaitMs);
        const double float16 = weightBytes(label->text());
        auto* combo = child<QComboBox>(&page, "quantizationCombo");
        combo->setCurrentIndex(combo->findData(QStringLiteral("nf4")));
        QTRY_VERIFY_WITH_TIMEOUT(weightBytes(label->text()) > 0 && weightBytes(label->text()) < float16 / 4, kWaitMs);
        QVERIFY(!label->text().contains("Base weights: 4-bit"));  // chosen already
    }

    // A model whose checkpoint is 4-bit already: the choice shows it, disabled; the user's own choice returns
    // with the next float model. The fixture is a real bitsandbytes checkpoint without a tokenizer (the Model
    // page refuses it for that); the Train page's estimate reads only its config.json.
    void trainPagePrequantizedModel() {
        TrainPage page;
        auto* combo = child<QComboBox>(&page, "quantizationCombo");
        combo->setCurrentIndex(combo->findData(QStringLiteral("nf4")));
        page.setModel(fixture("models/llama-nf4"), true);
        QVERIFY(!combo->isEnabled());
        QCOMPARE(combo->currentText(), QStringLiteral("4-bit (from the checkpoint)"));
        auto* help = child<QLabel>(&page, "quantizationHelp");
        QVERIFY2(help->text().startsWith("4-bit from the checkpoint") && help->text().contains("NF4"),
                 qPrintable(help->text()));
        QCOMPARE(page.config().quantization, Quantization::Nf4);  // the user's choice, kept for the next model
        auto* label = child<QLabel>(&page, "memoryLabel");
        QTRY_VERIFY_WITH_TIMEOUT(weightBytes(label->text()) > 0, kWaitMs);
        // Reopened settings keep the checkpoint's item, and bring their own choice for later.
        RunConfig c = page.config();
        c.quantization = Quantization::None;
        page.setConfig(c);
        QVERIFY(!combo->isEnabled());
        QCOMPARE(combo->currentData().toString(), QStringLiteral("checkpoint"));
        QCOMPARE(page.config().quantization, Quantization::None);
        // A float model: the choice is the user's again.
        page.setModel(m_demo, true);
        QVERIFY(combo->isEnabled());
        QCOMPARE(combo->findData(QStringLiteral("checkpoint")), -1);
        QCOMPARE(combo->currentData().toString(), QStringLiteral("none"));
        combo->setCurrentIndex(combo->findData(QStringLiteral("nf4")));
        page.setModel(fixture("models/llama-nf4"), true);
        page.setModel(m_demo, true);
        QCOMPARE(combo->currentData().toString(), QStringLiteral("nf4"));
        QCOMPARE(page.config().quantization, Quantization::Nf4);
    }

    // Precision on this machine: disabled until system_info answers; then offered only where the GPU trains in
    // FP8 (CI has no GPU: disabled, the reason in the tooltip). A reopened fp8 config shows bf16 where FP8 is not
    // available (like device cuda without a GPU), and a chosen FP8 falls back when the answer says no.
    void trainPagePrecisionWithoutFp8() {
        TrainPage page;
        QSignalSpy checked(&page, &TrainPage::gpuChecked);
        auto* combo = child<QComboBox>(&page, "precisionCombo");
        QCOMPARE(combo->count(), 2);
        QCOMPARE(combo->itemText(0), QStringLiteral("16-bit (bf16)"));
        QCOMPARE(combo->itemText(1), QStringLiteral("8-bit floating point (FP8, faster)"));
        QCOMPARE(combo->currentData().toString(), QStringLiteral("bf16"));
        QVERIFY(!combo->isEnabled());  // not known yet
        QTRY_COMPARE_WITH_TIMEOUT(checked.count(), 1, kWaitMs);
        const QString reason = QString::fromStdString(fp8_unsupported_reason(system_info()));
        if (reason.isEmpty()) {  // a Hopper GPU
            QVERIFY(combo->isEnabled());
        } else {
            QVERIFY(!combo->isEnabled());
            QVERIFY2(combo->toolTip().contains(QStringLiteral("FP8 is not available on this machine: ") +
                                               inScreenWords(reason)),
                     qPrintable(combo->toolTip()));
        }
        QCOMPARE(page.config().precision, Precision::Bf16);

        // The answer "no" (a GPU without FP8), through the page's hook: disabled with the reason in screen words.
        page.setFp8Support(
            QStringLiteral("NVIDIA RTX A4000 (compute capability 8.6) has no FP8 tensor cores (they "
                           "start with Hopper, compute capability 9.0); use precision bf16"));
        QVERIFY(!combo->isEnabled());
        QVERIFY2(combo->toolTip().contains("no FP8 tensor cores") &&
                     combo->toolTip().contains("use Precision: 16-bit (bf16) on the Train page"),
                 qPrintable(combo->toolTip()));
        RunConfig c = tinyRun(m_tmp.filePath(QStringLiteral("runs/x")), 3);
        c.precision = Precision::Fp8;
        page.setConfig(c);
        QCOMPARE(combo->currentData().toString(), QStringLiteral("bf16"));
        QCOMPARE(page.config().precision, Precision::Bf16);
        QCOMPARE(page.config().training.max_steps, int64_t(3));  // the other settings come through

        // FP8 chosen (e.g. restored from the last settings before the answer), then the answer no: back to bf16.
        page.setFp8Support({});
        QVERIFY(combo->isEnabled());
        QVERIFY(!combo->toolTip().contains("not available"));
        combo->setCurrentIndex(combo->findData(QStringLiteral("fp8")));
        QCOMPARE(page.config().precision, Precision::Fp8);
        page.setFp8Support(QStringLiteral("no usable GPU (no NVIDIA driver); FP8 training needs an NVIDIA Hopper GPU"));
        QVERIFY(!combo->isEnabled());
        QCOMPARE(combo->currentData().toString(), QStringLiteral("bf16"));
        QCOMPARE(page.config().precision, Precision::Bf16);
        QVERIFY(combo->toolTip().contains("no NVIDIA driver"));
    }

    // Precision into config() and back (FP8 offered through the page's hook where no GPU can), with its
    // explanation; the memory estimate and the longest-sample line are computed anew for the choice.
    void trainPagePrecisionRoundTrip() {
        TrainPage page;
        QSignalSpy checked(&page, &TrainPage::gpuChecked);
        QTRY_COMPARE_WITH_TIMEOUT(checked.count(), 1, kWaitMs);  // the real answer first: the hook below wins
        page.setFp8Support({});
        selectReady(page);
        auto* combo = child<QComboBox>(&page, "precisionCombo");
        auto* help = child<QLabel>(&page, "precisionHelp");
        QVERIFY(combo->isEnabled());
        QCOMPARE(page.config().precision, Precision::Bf16);
        QVERIFY2(help->text().startsWith("16-bit (bf16)"), qPrintable(help->text()));
        auto* longest = child<QLabel>(&page, "longestContextLabel");
        const QRegularExpression fits(R"(^Longest sample that fits with these settings: (\d+) tokens)");
        QTRY_VERIFY_WITH_TIMEOUT(fits.match(longest->text()).hasMatch(), kWaitMs);
        auto* train = child<QPushButton>(&page, "trainButton");
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);

        combo->setCurrentIndex(combo->findData(QStringLiteral("fp8")));
        QCOMPARE(page.config().precision, Precision::Fp8);
        QVERIFY2(help->text().startsWith("FP8") && help->text().contains("8 bits") && help->text().contains("1.3x"),
                 qPrintable(help->text()));
        // Both workers start again for the new settings: no number or verdict for the old ones meanwhile.
        QVERIFY2(longest->text().contains("computing"), qPrintable(longest->text()));
        QVERIFY(!train->isEnabled());
        QCOMPARE(page.blockedReason(), QStringLiteral("Estimating memory…"));
        QTRY_VERIFY_WITH_TIMEOUT(fits.match(longest->text()).hasMatch(), kWaitMs);
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
        const nlohmann::json j = page.config();
        QCOMPARE(QString::fromStdString(j.at("precision").get<std::string>()), QStringLiteral("fp8"));

        // Into another page and back; and back to bf16 there.
        RunConfig c = page.config();
        TrainPage other;
        QSignalSpy otherChecked(&other, &TrainPage::gpuChecked);
        QTRY_COMPARE_WITH_TIMEOUT(otherChecked.count(), 1, kWaitMs);
        other.setFp8Support({});
        QCOMPARE(other.config().precision, Precision::Bf16);
        selectReady(other);
        other.setConfig(c);
        auto* otherCombo = child<QComboBox>(&other, "precisionCombo");
        QCOMPARE(otherCombo->currentData().toString(), QStringLiteral("fp8"));
        RunConfig back = other.config();
        back.output_dir.clear();
        c.output_dir.clear();
        QVERIFY(back == c);
        otherCombo->setCurrentIndex(otherCombo->findData(QStringLiteral("bf16")));
        QCOMPARE(other.config().precision, Precision::Bf16);
        QVERIFY(!nlohmann::json(other.config()).contains("precision"));  // the default is not written
    }

    // FP8 goes with 4-bit base weights (dequantized straight to FP8 per GEMM): both items stay allowed whichever
    // is chosen, config() carries both, and a 4-bit checkpoint keeps the user's FP8.
    void trainPagePrecisionWithFourBit() {
        TrainPage page;
        QSignalSpy checked(&page, &TrainPage::gpuChecked);
        QTRY_COMPARE_WITH_TIMEOUT(checked.count(), 1, kWaitMs);
        page.setFp8Support({});
        selectReady(page);
        auto* precision = child<QComboBox>(&page, "precisionCombo");
        auto* quantization = child<QComboBox>(&page, "quantizationCombo");
        QVERIFY(itemAllowed(precision, "fp8") && itemAllowed(quantization, "nf4"));

        precision->setCurrentIndex(precision->findData(QStringLiteral("fp8")));
        QVERIFY(itemAllowed(quantization, "nf4"));
        quantization->setCurrentIndex(quantization->findData(QStringLiteral("nf4")));
        QVERIFY(itemAllowed(precision, "fp8"));
        QCOMPARE(page.config().precision, Precision::Fp8);
        QCOMPARE(page.config().quantization, Quantization::Nf4);
        QVERIFY(!precision->property("invalid").toBool());
        QVERIFY(!quantization->property("invalid").toBool());
        QTRY_VERIFY_WITH_TIMEOUT(child<QPushButton>(&page, "trainButton")->isEnabled(), kWaitMs);
        // A small model: FP8 is said to bring little (a warning, Train stays enabled); a large one: nothing said.
        page.setModelShape(1024, 4096);
        QCOMPARE(page.warnings().size(), 1);
        QVERIFY2(page.warnings().first().startsWith("Precision FP8 brings little at hidden size 1024"),
                 qPrintable(page.warnings().first()));
        QVERIFY(child<QPushButton>(&page, "trainButton")->isEnabled());
        page.setModelShape(4096, 131072);
        QVERIFY(page.warnings().isEmpty());

        // A 4-bit checkpoint: "from the checkpoint", FP8 kept; a float model gets the user's nf4 back.
        page.setModel(fixture("models/llama-nf4"), true);
        QCOMPARE(precision->currentData().toString(), QStringLiteral("fp8"));
        QVERIFY(itemAllowed(precision, "fp8"));
        QCOMPARE(page.config().precision, Precision::Fp8);
        page.setModel(m_demo, true);
        QCOMPARE(precision->currentData().toString(), QStringLiteral("fp8"));
        QCOMPARE(page.config().quantization, Quantization::Nf4);

        // A reopened fp8 + nf4 config shows both, unmarked.
        RunConfig c = page.config();
        precision->setCurrentIndex(precision->findData(QStringLiteral("bf16")));
        page.setConfig(c);
        QCOMPARE(precision->currentData().toString(), QStringLiteral("fp8"));
        QCOMPARE(quantization->currentData().toString(), QStringLiteral("nf4"));
        QVERIFY(!precision->property("invalid").toBool());
    }

    // "Longest sample that fits with these settings": computed off the GUI thread, never stale, "cannot tell"
    // with the reason when the engine cannot plan.
    void trainPageLongestSample() {
        TrainPage page;
        auto* device = child<QComboBox>(&page, "deviceCombo");
        const bool gpu = system_info().gpu_usable;
        if (!gpu) QTRY_VERIFY_WITH_TIMEOUT(device->findData(QStringLiteral("cuda")) < 0, kWaitMs);  // asked at start
        auto* longest = child<QLabel>(&page, "longestContextLabel");
        QVERIFY(longest->isHidden());  // no model yet
        page.setModel(m_demo, true);
        const QRegularExpression fits(R"(^Longest sample that fits with these settings: (\d+) tokens)");
        QTRY_VERIFY_WITH_TIMEOUT(fits.match(longest->text()).hasMatch(), kWaitMs);
        QVERIFY(!longest->isHidden());
        const int tokens = fits.match(longest->text()).captured(1).toInt();
        QVERIFY(tokens >= 64 && tokens % 64 == 0);
        // The demo model is tiny: its whole context fits (in RAM or on any GPU), and the line says that is the
        // model's limit.
        const int64_t positions = load_model_config(m_demo.toStdString()).max_position_embeddings;
        QCOMPARE(int64_t(tokens), positions / 64 * 64);
        QVERIFY2(longest->text().contains("whole context"), qPrintable(longest->text()));
        // What longest_context sets itself (max seq len, batch tokens) does not make the line stale.
        child<QSpinBox>(&page, "maxSeqLenSpin")->setValue(128);
        QVERIFY(fits.match(longest->text()).hasMatch());
        // Other settings: no number while the new one is computed.
        child<QSpinBox>(&page, "rankSpin")->setValue(32);
        QVERIFY2(!fits.match(longest->text()).hasMatch(), qPrintable(longest->text()));
        QVERIFY(longest->text().contains("computing"));
        QTRY_VERIFY_WITH_TIMEOUT(fits.match(longest->text()).hasMatch(), kWaitMs);
        // No model: no line.
        page.setModel(m_demo, false);
        QTRY_VERIFY_WITH_TIMEOUT(longest->isHidden(), kWaitMs);
        page.setModel(m_demo, true);
        QTRY_VERIFY_WITH_TIMEOUT(fits.match(longest->text()).hasMatch(), kWaitMs);
        if (gpu) return;  // the refusal below needs a machine without a usable GPU
        // Device cuda without a GPU: the engine cannot plan; the line says so with the reason.
        page.setGpuAvailable(true, {});
        device->setCurrentIndex(device->findData(QStringLiteral("cuda")));
        QTRY_VERIFY_WITH_TIMEOUT(longest->text().contains("cannot tell ("), kWaitMs);
        QVERIFY(!fits.match(longest->text()).hasMatch());
        QCOMPARE(longest->property("tone").toInt(), int(Tone::Warning));
    }

    void trainPageTrainRequestedAndRestored() {
        {
            TrainPage page;
            selectReady(page);
            child<QSpinBox>(&page, "rankSpin")->setValue(12);
            auto* train = child<QPushButton>(&page, "trainButton");
            QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
            QSignalSpy requested(&page, &TrainPage::trainRequested);
            QTest::mouseClick(train, Qt::LeftButton);
            QCOMPARE(requested.count(), 1);
            const auto c = requested.at(0).at(0).value<RunConfig>();
            QCOMPARE(c.lora.r, 12);
            QCOMPARE(c.model, m_demo.toStdString());
        }
        // The next start begins from the last settings (not from the defaults).
        TrainPage next;
        QCOMPARE(child<QSpinBox>(&next, "rankSpin")->value(), 12);
        QCOMPARE(child<QLineEdit>(&next, "runsFolderEdit")->text(), m_tmp.filePath(QStringLiteral("runs")));
    }

    // Validation (a share or a file), eval and checkpoint intervals, warmup ratio, weight decay, max grad norm
    // and an adapter to continue: each a field that reaches config(), and a bad file or folder blocks Train.
    void trainPageValidationCheckpointAndOptimizerFields() {
        TrainPage page;
        selectReady(page);
        auto* train = child<QPushButton>(&page, "trainButton");
        auto* share = child<QDoubleSpinBox>(&page, "validationShareSpin");
        auto* file = child<QLineEdit>(&page, "validationFileEdit");
        QCOMPARE(share->value(), 0.0);
        share->setValue(20);
        QCOMPARE(page.config().data.validation_fraction, 0.2);
        child<QSpinBox>(&page, "evalEverySpin")->setValue(5);
        QCOMPARE(page.config().training.eval_every, int64_t(5));
        child<QSpinBox>(&page, "checkpointEverySpin")->setValue(7);
        QCOMPARE(page.config().training.checkpoint_every, int64_t(7));
        // A validation file wins over the share: the share box is disabled.
        const QString chat = source("datasets/demo_chat.jsonl");
        file->setText(chat);
        QVERIFY(!share->isEnabled());
        QCOMPARE(page.config().data.validation, chat.toStdString());
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
        file->setText(m_tmp.filePath(QStringLiteral("no-such.jsonl")));
        QVERIFY(!train->isEnabled());
        QVERIFY(file->property("invalid").toBool());
        QVERIFY2(train->toolTip().startsWith("Validation file:"), qPrintable(train->toolTip()));
        file->clear();
        QVERIFY(share->isEnabled());

        auto* ratio = child<QDoubleSpinBox>(&page, "warmupRatioSpin");
        child<QSpinBox>(&page, "warmupSpin")->setValue(0);
        QVERIFY(ratio->isEnabled());
        ratio->setValue(0.05);
        QCOMPARE(page.config().training.warmup_ratio, 0.05);
        child<QSpinBox>(&page, "warmupSpin")->setValue(3);
        QVERIFY(!ratio->isEnabled());  // warmup steps win
        child<QDoubleSpinBox>(&page, "weightDecaySpin")->setValue(0.01);
        QCOMPARE(page.config().training.weight_decay, 0.01);
        child<QDoubleSpinBox>(&page, "maxGradNormSpin")->setValue(0);
        QCOMPARE(page.config().training.max_grad_norm, 0.0);  // no clipping

        // Continue from an adapter: a folder without adapter_config.json is refused; a real one disables the
        // LoRA shape fields (the adapter's own are used).
        auto* adapter = child<QLineEdit>(&page, "initAdapterEdit");
        adapter->setText(m_tmp.path());
        QVERIFY(!train->isEnabled());
        QVERIFY(adapter->property("invalid").toBool());
        QVERIFY2(train->toolTip().contains("not an adapter folder"), qPrintable(train->toolTip()));
        const QString adapterDir = m_tmp.filePath(QStringLiteral("an-adapter"));
        writeText(adapterDir + "/adapter_config.json", "{}");
        adapter->setText(adapterDir);
        QVERIFY(!adapter->property("invalid").toBool());
        QCOMPARE(page.config().init_adapter, adapterDir.toStdString());
        QVERIFY(!child<QSpinBox>(&page, "rankSpin")->isEnabled());
        QVERIFY(child<QDoubleSpinBox>(&page, "dropoutSpin")->isEnabled());
        QVERIFY(!child<QLabel>(&page, "initAdapterNote")->isHidden());
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
        adapter->clear();
        QVERIFY(child<QSpinBox>(&page, "rankSpin")->isEnabled());

        // A reopened config fills them all.
        RunConfig c = page.config();
        c.data.validation_fraction = 0.125;  // 12.5 %: shown exactly
        c.training.eval_every = 11;
        c.init_adapter = adapterDir.toStdString();
        c.training.max_grad_norm = 0.5;
        TrainPage other;
        other.setConfig(c);
        QCOMPARE(child<QDoubleSpinBox>(&other, "validationShareSpin")->value(), 12.5);
        QCOMPARE(child<QSpinBox>(&other, "evalEverySpin")->value(), 11);
        QCOMPARE(child<QLineEdit>(&other, "initAdapterEdit")->text(), adapterDir);
        QCOMPARE(child<QDoubleSpinBox>(&other, "maxGradNormSpin")->value(), 0.5);
    }

    // Valid but implausible settings are said before Train (and do not block it); the Data page's verdict
    // that nothing is left to train on does block it.
    void trainPagePlausibilityWarnings() {
        TrainPage page;
        selectReady(page);
        auto* train = child<QPushButton>(&page, "trainButton");
        auto* warnings = child<QLabel>(&page, "trainWarningsLabel");
        child<QSpinBox>(&page, "maxSeqLenSpin")->setValue(512);
        child<QSpinBox>(&page, "batchTokensSpin")->setValue(1024);
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
        QVERIFY(page.warnings().isEmpty());
        QVERIFY(warnings->isHidden());

        child<QLineEdit>(&page, "lrEdit")->setText(QStringLiteral("0.05"));
        QCOMPARE(page.warnings().size(), 1);
        QVERIFY2(page.warnings().first().startsWith("Learning rate 0.05 is very high"),
                 qPrintable(page.warnings().first()));
        QVERIFY(!warnings->isHidden());
        QVERIFY(warnings->text().contains("Learning rate 0.05"));
        // The model's shape: a rank above the hidden size, a max seq len above the context.
        page.setModelShape(64, 256);
        QCOMPARE(page.warnings().size(), 2);
        QVERIFY2(page.warnings().at(1).contains("above the model's context (256 tokens)"),
                 qPrintable(page.warnings().at(1)));
        child<QSpinBox>(&page, "rankSpin")->setValue(128);
        QCOMPARE(page.warnings().size(), 3);
        QVERIFY(warnings->text().contains("larger than the model's hidden size (64)"));
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);  // warnings never block
        child<QLineEdit>(&page, "lrEdit")->setText(QStringLiteral("2e-4"));
        child<QSpinBox>(&page, "rankSpin")->setValue(8);
        child<QSpinBox>(&page, "maxSeqLenSpin")->setValue(256);
        QVERIFY(page.warnings().isEmpty());
        QVERIFY(warnings->isHidden());

        // The Data page: a template warning is shown; no sample left blocks Train with its reason.
        page.setDataCheck(QString(), {QStringLiteral("The chatml template writes special tokens…")});
        QCOMPARE(page.warnings().size(), 1);
        const QString none = QStringLiteral("No sample is left to train on at Max seq len 256.");
        page.setDataCheck(none, {});
        QVERIFY(!train->isEnabled());
        QCOMPARE(train->toolTip(), none);
        page.setDataCheck(QString(), {});
        QTRY_VERIFY_WITH_TIMEOUT(train->isEnabled(), kWaitMs);
        QCOMPARE(child<QLabel>(&page, "trainBlockedLabel")->text(), QStringLiteral("Ready: press Train."));
    }

    // The chat template is chosen on the Data page (with "train on prompt tokens too"); a built-in template
    // whose special tokens the tokenizer does not know is warned about, with the share of unknown tokens.
    void dataPageTemplateChoiceAndUnknownTokens() {
        // A base model without a chat template whose tokenizer knows neither ChatML token nor '|' (no byte
        // fallback): ChatML's markers become <unk>.
        const QString base = m_tmp.filePath(QStringLiteral("base-no-template"));
        create_demo_model(base.toStdString());
        {
            std::ifstream in((base + "/tokenizer.json").toStdString());
            nlohmann::ordered_json tok = nlohmann::ordered_json::parse(in);
            auto& vocab = tok["model"]["vocab"];
            for (const char* t : {"|", "<|im_start|>", "<|im_end|>"}) {
                const int id = vocab[t].get<int>();
                vocab.erase(t);
                vocab[std::string("<unused") + std::to_string(id) + ">"] = id;
            }
            tok["model"]["byte_fallback"] = false;
            auto& added = tok["added_tokens"];
            for (auto it = added.begin(); it != added.end();)
                it = std::string((*it)["content"]).find("<|") == 0 ? added.erase(it) : it + 1;
            std::ifstream cin((base + "/tokenizer_config.json").toStdString());
            nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(cin);
            cfg.erase("chat_template");
            cfg["eos_token"] = "</s>";
            writeText(base + "/tokenizer.json", QByteArray::fromStdString(tok.dump()));
            writeText(base + "/tokenizer_config.json", QByteArray::fromStdString(cfg.dump()));
        }
        DataPage page;
        QSignalSpy rendering(&page, &DataPage::renderingChanged);
        QSignalSpy checked(&page, &DataPage::checked);
        page.setModel(base);
        page.selectDataset(m_alpaca);
        auto* warning = child<QLabel>(&page, "templateWarningLabel");
        QTRY_VERIFY_WITH_TIMEOUT(!warning->isHidden(), kWaitMs);
        const QString text = warning->text();
        QVERIFY2(text.contains("no chat template") && text.contains("chatml") && text.contains("<|im_start|>") &&
                     QRegularExpression(R"(\d+\.\d% of the tokens are unknown \(<unk>\))").match(text).hasMatch(),
                 qPrintable(text));
        QTRY_VERIFY_WITH_TIMEOUT(!checked.isEmpty() && !checked.last().at(1).toStringList().isEmpty(), kWaitMs);
        QCOMPARE(checked.last().at(1).toStringList().first(), text);
        // alpaca writes plain-text markers: no warning, and the choice reaches the Train page's signal.
        auto* combo = child<QComboBox>(&page, "chatTemplateCombo");
        combo->setCurrentIndex(combo->findData(QStringLiteral("alpaca")));
        QCOMPARE(rendering.count(), 1);
        QCOMPARE(rendering.last().at(0).toString(), QStringLiteral("alpaca"));
        QTRY_VERIFY_WITH_TIMEOUT(
            warning->isHidden() && child<QTextBrowser>(&page, "previewView")->toPlainText().contains("### Response:"),
            kWaitMs);
        // Train on prompt tokens too: more of the sample is trained.
        auto trained = [&] {
            const auto m =
                QRegularExpression(R"((\d+) trained)").match(child<QLabel>(&page, "sampleInfoLabel")->text());
            return m.hasMatch() ? m.captured(1).toInt() : -1;
        };
        const int replies = trained();
        QVERIFY(replies > 0);
        child<QCheckBox>(&page, "trainOnAllCheck")->setChecked(true);
        QCOMPARE(rendering.last().at(1).toBool(), true);
        QTRY_VERIFY_WITH_TIMEOUT(trained() > replies, kWaitMs);
        // A reopened run's choice, set back without a user's edit.
        page.setRendering(QStringLiteral("llama3"), false);
        QCOMPARE(combo->currentData().toString(), QStringLiteral("llama3"));
        QVERIFY(!child<QCheckBox>(&page, "trainOnAllCheck")->isChecked());
        // llama3's header tokens are unknown to this tokenizer as well, though the model "has no template" is
        // not what it says now: the template was chosen.
        QTRY_VERIFY_WITH_TIMEOUT(!warning->isHidden(), kWaitMs);
        QVERIFY2(warning->text().contains("<|start_header_id|>"), qPrintable(warning->text()));
    }

    void screenWordsReplaceKeysAndFlags() {
        QCOMPARE(inScreenWords("training.batch_tokens: 256 is smaller than data.max_seq_len (512)"),
                 QStringLiteral("Batch tokens: 256 is smaller than Max seq len (512)"));
        QCOMPARE(inScreenWords("data.validation_fraction: 1 must be in [0, 1)"),
                 QStringLiteral("Validation share: 1 must be in [0, 1)"));
        QCOMPARE(inScreenWords("device: cuda: no GPU; use --device cpu"),
                 QStringLiteral("device: cuda: no GPU; choose Device: cpu on the Train page"));
        QCOMPARE(inScreenWords("stopped at step 4; resume with --resume"),
                 QStringLiteral("stopped at step 4; press Resume to continue"));
        QCOMPARE(inScreenWords("lora: r = 0 must be between 1 and 4096"),
                 QStringLiteral("Rank: 0 must be between 1 and 4096"));
        QCOMPARE(inScreenWords("my_training.lr stays"), QStringLiteral("my_training.lr stays"));  // not a whole key
        // QLoRA's flags and keys; the word itself stays where it is prose or part of another key.
        QCOMPARE(inScreenWords("needs 30 GiB; try --quantization nf4"),
                 QStringLiteral("needs 30 GiB; try Base weights: 4-bit (QLoRA) on the Train page"));
        QCOMPARE(inScreenWords("(Tandem quantizes to 4-bit itself: quantization nf4)"),
                 QStringLiteral("(Tandem quantizes to 4-bit itself: Base weights: 4-bit (QLoRA) on the Train page)"));
        QCOMPARE(inScreenWords("quantization: 'int3' is unknown; use none or nf4"),
                 QStringLiteral("Base weights: 'int3' is unknown; use none or nf4"));
        QCOMPARE(inScreenWords("memory: planning for a 24.0 GiB GPU (vram_budget_gib)"),
                 QStringLiteral("memory: planning for a 24.0 GiB GPU (GPU memory budget)"));
        QCOMPARE(inScreenWords("memory.vram_budget_gib: -1 must be 0 (the GPU's own size)"),
                 QStringLiteral("GPU memory budget: -1 must be 0 (the GPU's own size)"));
        QCOMPARE(inScreenWords("--vram-budget 0: expected a positive number of GiB"),
                 QStringLiteral("GPU memory budget 0: expected a positive number of GiB"));
        // The pinned host memory of smart checkpointing (a field of the Train page).
        QCOMPARE(
            inScreenWords("only 60 GiB (half of it by default: memory.host_budget_gib / --host-budget allows more)"),
            QStringLiteral("only 60 GiB (half of it by default: Pinned host memory allows more)"));
        QCOMPARE(inScreenWords("memory.host_budget_gib: -1.000000 must be 0"),
                 QStringLiteral("Pinned host memory: -1.000000 must be 0"));
        // Precision's flag and key the same way.
        QCOMPARE(inScreenWords("precision: 'fp4' is unknown; use bf16 or fp8"),
                 QStringLiteral("Precision: 'fp4' is unknown; use bf16 or fp8"));
        QCOMPARE(inScreenWords("try --precision fp8"),
                 QStringLiteral("try Precision: 8-bit floating point (FP8, faster) on the Train page"));
        QCOMPARE(inScreenWords("--precision bf16"), QStringLiteral("Precision: 16-bit (bf16) on the Train page"));
        QCOMPARE(inScreenWords("--precision x: unknown"), QStringLiteral("Precision x: unknown"));
        for (const char* prose : {"quantization_config.bnb_4bit_quant_type 'x' is not supported",
                                  "double quantization (nested blocks of 256)", "4-bit quantization reads BF16",
                                  "the adapter trains in full precision",
                                  "'%' formatting with width or precision on %s", "fp32_precision stays"})
            QCOMPARE(inScreenWords(QString::fromLatin1(prose)), QString::fromLatin1(prose));
        QCOMPARE(countOf(1, "record"), QStringLiteral("1 record"));
        QCOMPARE(countOf(2, "record"), QStringLiteral("2 records"));
    }

    void modelPageNamesRefreshAndPlaceholders() {
        // "babyllama-tok105/hf", not "hf"; a config's _name_or_path repo id when it has one.
        const QString hf = m_tmp.filePath(QStringLiteral("babyllama/hf"));
        create_demo_model(hf.toStdString());
        QCOMPARE(modelDisplayName(hf), QStringLiteral("babyllama/hf"));
        const QString named = m_tmp.filePath(QStringLiteral("named-model"));
        create_demo_model(named.toStdString());
        {
            std::ifstream in((named + "/config.json").toStdString());
            nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(in);
            cfg["_name_or_path"] = "acme/named-7b";
            writeText(named + "/config.json", QByteArray::fromStdString(cfg.dump()));
        }
        QCOMPARE(modelDisplayName(named), QStringLiteral("acme/named-7b"));
        QCOMPARE(modelDisplayName(m_demo), QStringLiteral("demo-model"));

        QSettings().remove(QStringLiteral("model/recent"));
        ModelPage page;
        auto* recent = child<PlaceholderListWidget>(&page, "recentModels");
        QVERIFY(recent->showsPlaceholder());
        QVERIFY(recent->placeholderText().contains("No recent models"));
        auto* list = child<PlaceholderListWidget>(&page, "hfCacheModels");
        QTRY_COMPARE_WITH_TIMEOUT(list->count(), 1, kWaitMs);
        QVERIFY(!list->showsPlaceholder());
        // A model downloaded while the studio runs appears on Refresh.
        const QString snap = m_hfCache + "/models--acme--second/snapshots/r2";
        create_demo_model(snap.toStdString());
        auto* refresh = child<QPushButton>(&page, "hfRefreshButton");
        QTRY_VERIFY_WITH_TIMEOUT(refresh->isEnabled(), kWaitMs);
        refresh->click();
        QTRY_COMPARE_WITH_TIMEOUT(list->count(), 2, kWaitMs);
        QDir(m_hfCache + "/models--acme--second").removeRecursively();
        // The Train page learns the model's shape with the selection.
        QSignalSpy shape(&page, &ModelPage::modelShape);
        page.selectModel(m_demo);
        QTRY_COMPARE_WITH_TIMEOUT(shape.count(), 1, kWaitMs);
        QCOMPARE(shape.at(0).at(0).toLongLong(), 64);
        QVERIFY(shape.at(0).at(1).toLongLong() > 0);
        QVERIFY(!recent->showsPlaceholder());
    }

    // ----- Runs page ------------------------------------------------------------------------------------

    // A run that diverged is listed as such, is not offered for Resume, and its last good checkpoint exports.
    void runsPageDivergedRun() {
        const QString runs = m_tmp.filePath(QStringLiteral("runs-diverged"));
        const QString dir = runs + "/20240104-000000-diverged";
        RunConfig c = tinyRun(dir, 40);
        c.data.max_seq_len = 128;
        c.lora.alpha = 8;
        c.training.lr = 1e5;
        c.training.checkpoint_every = 1;
        {
            std::atomic<bool> stop{false};
            ProgressSink sink;
            Trainer t = Trainer::prepare(c);
            t.run(sink, stop);
            QVERIFY(t.diverged());
        }
        QVERIFY(latest_checkpoint(dir.toStdString()).has_value());
        RunsPage page;
        page.setRunsFolder(runs);
        auto* table = child<QTableWidget>(&page, "runsTable");
        QTRY_COMPARE_WITH_TIMEOUT(table->rowCount(), 1, kWaitMs);
        QCOMPARE(table->item(0, 3)->text(), QStringLiteral("diverged"));
        QVERIFY2(table->item(0, 3)->toolTip().contains("Learning rate"), qPrintable(table->item(0, 3)->toolTip()));
        QCOMPARE(table->item(0, 5)->text(), QStringLiteral("—"));  // the last loss was not finite
        table->selectRow(0);
        QVERIFY(!child<QPushButton>(&page, "resumeButton")->isEnabled());
        QVERIFY(child<QPushButton>(&page, "reopenButton")->isEnabled());
        QVERIFY(child<QPushButton>(&page, "exportRunButton")->isEnabled());  // the last good checkpoint
    }

    // The compare view: hyper-parameter columns, eval curves, x by tokens, smoothing and log scale, the run
    // summary, Open folder, and runs from another folder.
    void runsPageCompareColumnsAndFolders() {
        const QString runs = m_tmp.filePath(QStringLiteral("runs-compare"));
        const QString other = m_tmp.filePath(QStringLiteral("runs-elsewhere"));
        const QString withEval = runs + "/20240201-000000-eval", bigger = runs + "/20240202-000000-bigger";
        const QString elsewhere = other + "/20240203-000000-elsewhere";
        auto train = [](const RunConfig& c) {
            std::atomic<bool> stop{false};
            ProgressSink sink;
            Trainer::prepare(c).run(sink, stop);
        };
        RunConfig e = tinyRun(withEval, 2);
        e.data.validation_fraction = 0.2;
        e.training.eval_every = 1;
        train(e);
        RunConfig b = tinyRun(bigger, 2);
        b.training.batch_tokens = 512;
        b.training.lr = 5e-4;
        train(b);
        train(tinyRun(elsewhere, 1));

        QSettings().remove(QStringLiteral("runs/otherFolders"));
        RunsPage page;
        page.setRunsFolder(runs);
        auto* table = child<QTableWidget>(&page, "runsTable");
        QTRY_COMPARE_WITH_TIMEOUT(table->rowCount(), 2, kWaitMs);
        auto header = [&](const QString& name) {
            for (int c = 0; c < table->columnCount(); ++c)
                if (table->horizontalHeaderItem(c)->text() == name) return c;
            return -1;
        };
        auto rowOf = [&](const QString& dir) {
            for (int r = 0; r < table->rowCount(); ++r)
                if (table->item(r, 0)->data(Qt::UserRole).toString() == dir) return r;
            return -1;
        };
        const int rb = rowOf(bigger), re = rowOf(withEval);
        QCOMPARE(table->item(rb, header("Learning rate"))->text(), QStringLiteral("0.0005"));
        QCOMPARE(table->item(rb, header("Rank"))->text(), QStringLiteral("4"));
        QCOMPARE(table->item(rb, header("Batch tokens"))->text(), QStringLiteral("512"));
        QCOMPARE(table->item(rb, header("Max seq len"))->text(), QStringLiteral("256"));
        QCOMPARE(table->item(rb, header("Device"))->text(), QStringLiteral("cpu"));
        QVERIFY(QRegularExpression(R"(^\d+s$)").match(table->item(rb, header("Duration"))->text()).hasMatch());

        auto* plot = child<QCustomPlot>(&page, "runsLossPlot");
        table->selectAll();
        QTRY_COMPARE_WITH_TIMEOUT(plot->graphCount(), 3, kWaitMs);  // two training curves, one eval curve
        int evalGraph = -1;
        for (int g = 0; g < plot->graphCount(); ++g)
            if (plot->graph(g)->name().endsWith("(eval)")) evalGraph = g;
        QVERIFY(evalGraph >= 0);
        QCOMPARE(plot->graph(evalGraph)->dataCount(), 2);  // eval every step, 2 steps
        const QString summary = child<QLabel>(&page, "runSummaryLabel")->text();
        QVERIFY2(summary.contains("best eval loss") && summary.contains("tokens seen"), qPrintable(summary));
        child<QCheckBox>(&page, "runsEvalCheck")->setChecked(false);
        QCOMPARE(plot->graphCount(), 2);
        // By tokens: the last key is the run's tokens, far more than its 2 steps.
        auto* xAxis = child<QComboBox>(&page, "runsXAxisCombo");
        xAxis->setCurrentIndex(xAxis->findData(QStringLiteral("tokens")));
        QVERIFY((plot->graph(0)->data()->constEnd() - 1)->key > 10);
        QCOMPARE(plot->xAxis->label(), QStringLiteral("tokens seen"));
        child<QSlider>(&page, "runsSmoothingSlider")->setValue(60);
        QCOMPARE(plot->graphCount(), 4);  // faint raw + smoothed per run
        child<QCheckBox>(&page, "runsLogScaleCheck")->setChecked(true);
        QCOMPARE(plot->yAxis->scaleType(), QCPAxis::stLogarithmic);

        // Open folder hands the run's folder to the file manager.
        UrlCatcher catcher;
        QDesktopServices::setUrlHandler(QStringLiteral("file"), &catcher, "open");
        table->clearSelection();
        table->selectRow(rowOf(withEval));
        auto* open = child<QPushButton>(&page, "openRunFolderButton");
        QVERIFY(open->isEnabled());
        open->click();
        QDesktopServices::unsetUrlHandler(QStringLiteral("file"));
        QCOMPARE(catcher.urls.size(), 1);
        QCOMPARE(catcher.urls.first().toLocalFile(), withEval);
        QVERIFY(re >= 0);

        // Runs of another folder are listed too, and remembered.
        page.setOtherFolders({other});
        QTRY_COMPARE_WITH_TIMEOUT(table->rowCount(), 3, kWaitMs);
        QVERIFY(rowOf(elsewhere) >= 0);
        QCOMPARE(QSettings().value(QStringLiteral("runs/otherFolders")).toStringList(), QStringList{other});
        QVERIFY(child<QLabel>(&page, "runsFolderLabel")->text().contains(QDir::toNativeSeparators(other)));
        page.setOtherFolders({});
        QTRY_COMPARE_WITH_TIMEOUT(table->rowCount(), 2, kWaitMs);
    }

    void runsPage() {
        const QString runs = m_tmp.filePath(QStringLiteral("runs-page"));
        const QString finished = runs + "/20240101-000000-finished";
        const QString stopped = runs + "/20240102-000000-stopped";
        const QString empty = runs + "/20240103-000000-empty";
        {
            std::atomic<bool> stop{false};
            ProgressSink sink;
            Trainer::prepare(tinyRun(finished, 2)).run(sink, stop);
        }
        {
            std::atomic<bool> stop{false};
            StopAfterFirstStep sink(stop);
            Trainer t = Trainer::prepare(tinyRun(stopped, 4));
            t.run(sink, stop);
            QVERIFY(t.stopped());
        }
        {
            nlohmann::json j = tinyRun(empty, 2);
            writeText(empty + "/config.json", QByteArray::fromStdString(j.dump()));
        }
        writeText(runs + "/not-a-run/notes.txt", "no config.json: not listed");

        RunsPage page;
        page.setRunsFolder(runs);
        auto* table = child<QTableWidget>(&page, "runsTable");
        QTRY_COMPARE_WITH_TIMEOUT(table->rowCount(), 3, kWaitMs);
        auto rowOf = [&](const QString& dir) {
            for (int r = 0; r < table->rowCount(); ++r)
                if (table->item(r, 0)->data(Qt::UserRole).toString() == dir) return r;
            return -1;
        };
        const int rf = rowOf(finished), rs = rowOf(stopped), re = rowOf(empty);
        QVERIFY(rf >= 0 && rs >= 0 && re >= 0);
        QCOMPARE(table->item(rf, 3)->text(), QStringLiteral("finished"));
        QCOMPARE(table->item(rs, 3)->text(), QStringLiteral("stopped"));
        QCOMPARE(table->item(re, 3)->text(), QStringLiteral("empty"));
        QCOMPARE(table->item(rf, 4)->text(), QStringLiteral("2"));
        QCOMPARE(table->item(rs, 4)->text(), QStringLiteral("1"));
        QCOMPARE(table->item(rf, 1)->text(), QStringLiteral("demo-model"));
        QCOMPARE(table->item(rf, 2)->text(), QStringLiteral("demo_alpaca.jsonl"));
        QVERIFY(table->item(rf, 5)->data(Qt::DisplayRole).toDouble() > 0);

        auto select = [&](std::initializer_list<int> rows) {
            table->clearSelection();
            for (int r : rows)
                table->selectionModel()->select(table->model()->index(r, 0),
                                                QItemSelectionModel::Select | QItemSelectionModel::Rows);
        };
        auto* plot = child<QCustomPlot>(&page, "runsLossPlot");
        select({rf, rs});
        QTRY_COMPARE_WITH_TIMEOUT(plot->graphCount(), 2, kWaitMs);
        QCOMPARE(plot->graph(0)->dataCount() + plot->graph(1)->dataCount(), 3);  // 2 + 1 steps

        auto* reopen = child<QPushButton>(&page, "reopenButton");
        auto* resume = child<QPushButton>(&page, "resumeButton");
        auto* exportButton = child<QPushButton>(&page, "exportRunButton");
        QVERIFY(!reopen->isEnabled());  // one run at a time

        select({rf});
        QVERIFY(reopen->isEnabled());
        QVERIFY(!resume->isEnabled());  // finished: nothing to resume
        QVERIFY(exportButton->isEnabled());
        QSignalSpy reopened(&page, &RunsPage::reopenConfig);
        reopen->click();
        QCOMPARE(reopened.count(), 1);
        const auto config = reopened.at(0).at(0).value<RunConfig>();
        QCOMPARE(config.model, m_demo.toStdString());
        QCOMPARE(config.lora.r, 4);
        QCOMPARE(config.training.max_steps, int64_t(2));
        QSignalSpy exported(&page, &RunsPage::exportRequested);
        exportButton->click();
        QCOMPARE(exported.count(), 1);
        QCOMPARE(exported.at(0).at(0).toString(), finished);

        select({rs});
        QVERIFY(resume->isEnabled());
        QSignalSpy resumed(&page, &RunsPage::resumeRequested);
        resume->click();
        QCOMPARE(resumed.count(), 1);
        QCOMPARE(resumed.at(0).at(0).toString(), stopped);

        select({re});
        QVERIFY(!resume->isEnabled());
        QVERIFY(!exportButton->isEnabled());

        // Delete, answering No first (nothing happens), then Yes.
        select({rowOf(stopped)});
        answerNextMessageBox(QMessageBox::No);
        child<QPushButton>(&page, "deleteRunButton")->click();
        QVERIFY(QFileInfo::exists(stopped));
        select({rowOf(stopped)});
        answerNextMessageBox(QMessageBox::Yes);
        child<QPushButton>(&page, "deleteRunButton")->click();
        QVERIFY(!QFileInfo::exists(stopped));
        QTRY_COMPARE_WITH_TIMEOUT(table->rowCount(), 2, kWaitMs);
        QCOMPARE(rowOf(stopped), -1);
        QVERIFY(QFileInfo::exists(finished));
    }
};

QTEST_MAIN(TestUiPages)
#include "test_ui_pages.moc"
