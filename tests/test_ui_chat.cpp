// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Chat page driven like a user on the CPU demo model: type, send, tokens arrive while the GUI stays
// responsive, the answer lands in the conversation; stop mid-answer; compare panes (base vs a run's adapter,
// answering at once, differently); a bad adapter (another base) names its file and the page keeps working;
// clear, copy, save to a JSONL dataset; the page inside the main window follows the Model page. While a
// training run holds the GPU (pretended: setGpuAvailable, setTrainingRun; CI has no GPU), a chat that would load
// there is refused with what to do, "Chat on the CPU" answers on the CPU, and a CPU run blocks nothing.
// The runs folder holds a run whose adapter/ is a random LoRA for the demo model (so it changes the answers)
// and a run whose adapter belongs to another model.
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "export/peft_adapter.h"
#include "model/lora_table.h"
#include "tandem/demo_model.h"
#include "tandem/model_config.h"
#include "ui/chat_page.h"
#include "ui/main_window.h"
#include "ui/model_page.h"
#include "ui/train_page.h"
#include "ui/training_session.h"

using namespace tandem;
using namespace tandem::ui;
namespace fs = std::filesystem;

namespace {

constexpr int kWaitMs = 60000;

template <typename T>
T* child(QWidget* page, const char* name) {
    T* w = page->findChild<T*>(QString::fromLatin1(name));
    if (!w) qFatal("no widget named %s", name);
    return w;
}

// A random LoRA for the model in model_dir, written as a PEFT adapter folder.
void writeAdapter(const fs::path& model_dir, const fs::path& dir, uint64_t seed) {
    const ModelConfig cfg = load_model_config(model_dir);
    LoraConfig lc;
    lc.r = 4;
    lc.alpha = 16;
    lc.target_modules = {"q_proj", "v_proj", "up_proj", "down_proj"};
    std::vector<LoraParam> params = init_lora_params(lora_tensor_specs(cfg, lc), seed);
    LoraTensors t;
    uint64_t x = seed;
    for (auto& p : params) {
        if (!p.spec.is_a)
            for (float& v : p.value) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                v = float(int64_t(x >> 40) % 2000 - 1000) / 1000.0f;
            }
        t[p.spec.name] = p.value;
    }
    write_peft_adapter(dir, lc, cfg, "", t);
}

QString paneText(ChatPage& page, const char* name) { return child<QTextBrowser>(&page, name)->toPlainText(); }

}  // namespace

class TestUiChat : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    QString m_demo, m_runs, m_tuned, m_wrong;

private slots:
    void initTestCase() {
        QVERIFY(m_tmp.isValid());
        const fs::path root(m_tmp.path().toStdString());
        create_demo_model(root / "demo");
        m_demo = QString::fromStdString((root / "demo").string());
        // runs/tuned/adapter: a LoRA for the demo model; runs/wrong/adapter: one for the llama fixture.
        writeAdapter(root / "demo", root / "runs" / "tuned" / "adapter", 3);
        writeAdapter(fs::path(TANDEM_FIXTURES_DIR) / "models" / "llama", root / "runs" / "wrong" / "adapter", 4);
        for (const char* run : {"tuned", "wrong"}) {  // a run folder is one with config.json (ui/run_scan.h)
            QFile c(QString::fromStdString((root / "runs" / run / "config.json").string()));
            QVERIFY(c.open(QIODevice::WriteOnly));
            c.write("{}");
        }
        m_runs = QString::fromStdString((root / "runs").string());
        m_tuned = QString::fromStdString((root / "runs" / "tuned" / "adapter").string());
        m_wrong = QString::fromStdString((root / "runs" / "wrong" / "adapter").string());
    }

    // Type, send: tokens stream in, the answer joins the conversation, tokens/s is shown; a second turn
    // keeps the first; clear empties it; the answer does not depend on the pane's redraws.
    void sendAndStream() {
        ChatPage page;
        page.setModel(m_demo);
        page.setRunsFolder(m_runs);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        QCOMPARE(child<QComboBox>(&page, "chatAdapterA")->currentData().toString(), QString());  // base first
        child<QSpinBox>(&page, "chatMaxTokens")->setValue(24);
        QSignalSpy tokens(&page, &ChatPage::tokenReceived);
        QSignalSpy done(&page, &ChatPage::turnFinished);
        auto* input = child<QPlainTextEdit>(&page, "chatInput");
        QTest::keyClicks(input, "Hello there");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QVERIFY(page.isBusy());
        QVERIFY(!child<QPushButton>(&page, "chatSend")->isEnabled());
        QVERIFY(child<QPushButton>(&page, "chatStop")->isEnabled());
        QVERIFY(input->toPlainText().isEmpty());
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, kWaitMs);
        QVERIFY(!page.isBusy());
        QVERIFY(tokens.count() > 0);
        const auto conv = page.conversation(0);
        QCOMPARE(conv.size(), size_t(2));
        QCOMPARE(conv[0].content, std::string("Hello there"));
        QCOMPARE(conv[1].role, std::string("assistant"));
        QString streamed;
        for (const auto& args : tokens) streamed += args.at(1).toString();
        QCOMPARE(streamed, QString::fromStdString(conv[1].content));
        QVERIFY(paneText(page, "chatPaneA").contains("Hello there"));
        QVERIFY(child<QLabel>(&page, "chatStatsA")->text().contains("tokens/s"));
        QVERIFY(child<QLabel>(&page, "chatStatus")->text().contains("KV cache"));
        // a second turn with a system prompt: the conversation grows, the system prompt leads it
        child<QPlainTextEdit>(&page, "chatSystem")->setPlainText("You are terse.");
        QTest::keyClicks(input, "And then?");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 2, kWaitMs);
        const auto conv2 = page.conversation(0);
        QCOMPARE(conv2.size(), size_t(5));
        QCOMPARE(conv2[0].role, std::string("system"));
        QCOMPARE(conv2[1].content, conv[0].content);
        QCOMPARE(conv2[2].content, conv[1].content);
        // copy, then clear
        QTest::mouseClick(child<QPushButton>(&page, "chatCopy"), Qt::LeftButton);
        QVERIFY(QApplication::clipboard()->text().contains("user: And then?"));
        QTest::mouseClick(child<QPushButton>(&page, "chatClear"), Qt::LeftButton);
        QCOMPARE(page.conversation(0).size(), size_t(1));  // the system prompt only
        QVERIFY(!paneText(page, "chatPaneA").contains("Hello there"));
    }

    // Stop mid-answer: the answer so far stays, the page is ready for the next message.
    void stopMidAnswer() {
        ChatPage page;
        page.setModel(m_demo);
        page.setStepDelayForTesting(20);
        child<QSpinBox>(&page, "chatMaxTokens")->setValue(2000);
        QSignalSpy tokens(&page, &ChatPage::tokenReceived);
        QSignalSpy done(&page, &ChatPage::turnFinished);
        QTest::keyClicks(child<QPlainTextEdit>(&page, "chatInput"), "Tell me everything");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(tokens.count() >= 3, kWaitMs);
        QTest::mouseClick(child<QPushButton>(&page, "chatStop"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, kWaitMs);
        QVERIFY(!page.isBusy());
        QVERIFY(child<QLabel>(&page, "chatStatsA")->text().contains("stopped"));
        const auto conv = page.conversation(0);
        QCOMPARE(conv.size(), size_t(2));
        QVERIFY(tokens.count() < 200);
        QVERIFY(child<QPushButton>(&page, "chatSend")->isEnabled());
    }

    // Compare: pane B starts on the run's adapter; both panes answer the same message at once, differently.
    void comparePanes() {
        ChatPage page;
        page.setModel(m_demo);
        page.setRunsFolder(m_runs);
        child<QSpinBox>(&page, "chatMaxTokens")->setValue(20);
        QSignalSpy done(&page, &ChatPage::turnFinished);
        QTest::keyClicks(child<QPlainTextEdit>(&page, "chatInput"), "Hi");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, kWaitMs);
        const std::string single = page.conversation(0).back().content;
        QTest::mouseClick(child<QPushButton>(&page, "chatClear"), Qt::LeftButton);

        QTest::mouseClick(child<QCheckBox>(&page, "chatCompare"), Qt::LeftButton);
        QVERIFY(child<QCheckBox>(&page, "chatCompare")->isChecked());
        auto* b = child<QComboBox>(&page, "chatAdapterB");
        QVERIFY(b->isVisibleTo(&page));
        QVERIFY(b->currentData().toString().endsWith("adapter"));
        b->setCurrentIndex(b->findData(m_tuned));
        QCOMPARE(page.adapterOf(1), m_tuned);
        QSignalSpy tokens(&page, &ChatPage::tokenReceived);
        QTest::keyClicks(child<QPlainTextEdit>(&page, "chatInput"), "Hi");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 2, kWaitMs);
        bool a = false, bb = false;
        for (const auto& args : tokens) (args.at(0).toInt() == 0 ? a : bb) = true;
        QVERIFY(a && bb);
        // (The base pane is not compared with `single` bit for bit: the turn reuses the cached prefix of the first
        // conversation, and the demo model's random logits are so flat that float rounding can flip a token.)
        QVERIFY(!page.conversation(0).back().content.empty() && !single.empty());
        QVERIFY(page.conversation(1).back().content != page.conversation(0).back().content);
        QVERIFY(child<QLabel>(&page, "chatStatsB")->text().contains("tokens/s"));
    }

    // A bad adapter (another base: wrong shapes) fails with a message naming its file; the user message
    // goes back to the input, and the base model still answers.
    void badAdapter() {
        ChatPage page;
        page.setModel(m_demo);
        page.setRunsFolder(m_runs);
        child<QSpinBox>(&page, "chatMaxTokens")->setValue(8);
        auto* a = child<QComboBox>(&page, "chatAdapterA");
        a->setCurrentIndex(a->findData(m_wrong));
        QCOMPARE(page.adapterOf(0), m_wrong);
        QSignalSpy failed(&page, &ChatPage::failed);
        QSignalSpy done(&page, &ChatPage::turnFinished);
        QTest::keyClicks(child<QPlainTextEdit>(&page, "chatInput"), "Hi");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, kWaitMs);
        QCOMPARE(failed.count(), 1);
        const QString msg = failed.at(0).at(0).toString();
        QVERIFY2(msg.contains(m_wrong), qPrintable(msg));
        QVERIFY(child<QLabel>(&page, "chatStatus")->text().contains(m_wrong));
        QVERIFY(page.conversation(0).empty());
        QCOMPARE(child<QPlainTextEdit>(&page, "chatInput")->toPlainText(), QString("Hi"));
        // an adapter folder chosen by hand that does not exist names the folder too
        page.setAdapterFolder(0, m_tmp.filePath("no-such-adapter"));
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 2, kWaitMs);
        QVERIFY(failed.at(1).at(0).toString().contains("no-such-adapter"));
        // back to the base model: it answers
        a->setCurrentIndex(0);
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 3, kWaitMs);
        QCOMPARE(failed.count(), 2);
        QCOMPARE(page.conversation(0).size(), size_t(2));
    }

    // "Save to dataset" appends the conversation as one JSONL chat record.
    void saveToDataset() {
        ChatPage page;
        page.setModel(m_demo);
        child<QSpinBox>(&page, "chatMaxTokens")->setValue(6);
        const QString file = m_tmp.filePath("corrections.jsonl");
        QVERIFY(!page.saveConversation(file));  // nothing yet
        QSignalSpy done(&page, &ChatPage::turnFinished);
        child<QPlainTextEdit>(&page, "chatSystem")->setPlainText("Be kind.");
        QTest::keyClicks(child<QPlainTextEdit>(&page, "chatInput"), "What is 2+2?");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, kWaitMs);
        QVERIFY(page.saveConversation(file));
        QVERIFY(page.saveConversation(file));
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QList<QByteArray> lines = f.readAll().trimmed().split('\n');
        QCOMPARE(lines.size(), 2);
        const auto j = nlohmann::json::parse(lines[0].toStdString());
        QCOMPARE(j["messages"].size(), size_t(3));
        QCOMPARE(j["messages"][0]["role"].get<std::string>(), std::string("system"));
        QCOMPARE(j["messages"][1]["content"].get<std::string>(), std::string("What is 2+2?"));
        QCOMPARE(j["messages"][2]["role"].get<std::string>(), std::string("assistant"));
    }

    // A run trains on the GPU and a GPU is usable: a turn on auto (or cuda) is refused before anything loads, the
    // message saying what holds the GPU and what to do; "Chat on the CPU" answers on the CPU; once the run has
    // ended, auto sends again.
    void refusedWhileRunHoldsGpu() {
        ChatPage page;
        page.setModel(m_demo);
        page.setGpuAvailable(true, {});  // pretend: a usable GPU, so auto means the GPU
        child<QSpinBox>(&page, "chatMaxTokens")->setValue(8);
        auto* device = child<QComboBox>(&page, "chatDevice");
        QCOMPARE(device->currentText(), QString("auto"));
        QVERIFY(device->findText("cuda") >= 0);
        auto* onCpu = child<QPushButton>(&page, "chatOnCpu");
        auto* status = child<QLabel>(&page, "chatStatus");
        QVERIFY(!onCpu->isVisibleTo(&page));
        page.setTrainingRun(true, DeviceChoice::Cuda);  // pretend: a run trains on the GPU
        QVERIFY(page.trainingHoldsGpu());
        QVERIFY(!page.releasingGpu());  // no chat session to close
        QVERIFY(onCpu->isVisibleTo(&page));
        QVERIFY2(status->text().contains("A training run is using the GPU"), qPrintable(status->text()));

        QSignalSpy failed(&page, &ChatPage::failed);
        QSignalSpy tokens(&page, &ChatPage::tokenReceived);
        QSignalSpy done(&page, &ChatPage::turnFinished);
        auto* input = child<QPlainTextEdit>(&page, "chatInput");
        QTest::keyClicks(input, "Hi");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QCOMPARE(failed.count(), 1);
        QVERIFY(!page.isBusy());
        const QString msg = failed.at(0).at(0).toString();
        for (const char* words : {"A training run is using the GPU", "Wait for the run to finish or stop it",
                                  "chat on the CPU"})
            QVERIFY2(msg.contains(words), qPrintable(msg));
        QVERIFY(!msg.contains("--") && !msg.contains("device="));  // screen words, no flags or keys
        QCOMPARE(status->text(), msg);
        QVERIFY(page.conversation(0).empty());
        QCOMPARE(input->toPlainText(), QString("Hi"));  // kept for "Chat on the CPU"
        QCOMPARE(page.sessionDevice(), QString());     // nothing was loaded
        QVERIFY(!page.holdsGpu());
        QTest::qWait(200);
        QCOMPARE(tokens.count(), 0);
        QCOMPARE(done.count(), 0);
        // cuda chosen by hand: refused the same way
        device->setCurrentIndex(device->findText("cuda"));
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QCOMPARE(failed.count(), 2);
        QCOMPARE(page.sessionDevice(), QString());

        // One click: the device box to cpu, the message sent, tokens arrive from the CPU.
        QTest::mouseClick(onCpu, Qt::LeftButton);
        QCOMPARE(page.device(), ChatSessionOptions::Device::Cpu);
        QCOMPARE(device->currentText(), QString("cpu"));
        QVERIFY(page.isBusy());
        QVERIFY(!onCpu->isVisibleTo(&page));
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, kWaitMs);
        QCOMPARE(failed.count(), 2);
        QVERIFY(tokens.count() > 0);
        QCOMPARE(page.sessionDevice(), QString("CPU"));
        QVERIFY(!page.holdsGpu());
        QVERIFY2(status->text().startsWith("CPU"), qPrintable(status->text()));
        QCOMPARE(page.conversation(0).size(), size_t(2));
        QCOMPARE(page.conversation(0)[0].content, std::string("Hi"));
        // a CPU chat goes on during the GPU run
        QTest::keyClicks(input, "More?");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 2, kWaitMs);
        QCOMPARE(failed.count(), 2);

        // The run ends: auto sends again (the engine's auto: the GPU where one is usable, the CPU here).
        page.setTrainingRun(false);
        QVERIFY(!page.trainingHoldsGpu());
        device->setCurrentIndex(device->findText("auto"));
        QVERIFY(!onCpu->isVisibleTo(&page));
        QTest::keyClicks(input, "And now?");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QVERIFY(page.isBusy());
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 3, kWaitMs);
        QCOMPARE(failed.count(), 2);
        QCOMPARE(page.conversation(0).size(), size_t(6));
    }

    // Refused while the run holds the GPU; the run ends with the page still on auto: the page says the GPU is
    // free again and the same message sends.
    void sendsAfterGpuRunEnds() {
        ChatPage page;
        page.setModel(m_demo);
        page.setGpuAvailable(true, {});
        child<QSpinBox>(&page, "chatMaxTokens")->setValue(6);
        page.setTrainingRun(true, DeviceChoice::Auto);  // auto with a usable GPU: the GPU while it loads
        QVERIFY(page.trainingHoldsGpu());
        QSignalSpy failed(&page, &ChatPage::failed);
        QSignalSpy done(&page, &ChatPage::turnFinished);
        QTest::keyClicks(child<QPlainTextEdit>(&page, "chatInput"), "Hi");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QCOMPARE(failed.count(), 1);
        page.setTrainingRun(false);
        QVERIFY(!child<QPushButton>(&page, "chatOnCpu")->isVisibleTo(&page));
        QVERIFY(child<QLabel>(&page, "chatStatus")->text().contains("The training run has ended"));
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, kWaitMs);
        QCOMPARE(failed.count(), 1);
        QCOMPARE(page.conversation(0).size(), size_t(2));
    }

    // A run on the CPU holds no GPU: a chat on auto (a GPU usable) is not refused. A run on auto without a usable
    // GPU is on the CPU too; once it reports the GPU, the page's CPU session is kept (it holds no GPU memory).
    void cpuRunDoesNotBlock() {
        ChatPage page;
        page.setModel(m_demo);
        page.setGpuAvailable(true, {});
        child<QSpinBox>(&page, "chatMaxTokens")->setValue(6);
        page.setTrainingRun(true, DeviceChoice::Cpu);
        QVERIFY(!page.trainingHoldsGpu());
        QVERIFY(!child<QPushButton>(&page, "chatOnCpu")->isVisibleTo(&page));
        QSignalSpy failed(&page, &ChatPage::failed);
        QSignalSpy done(&page, &ChatPage::turnFinished);
        QTest::keyClicks(child<QPlainTextEdit>(&page, "chatInput"), "Hi");
        QTest::mouseClick(child<QPushButton>(&page, "chatSend"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, kWaitMs);
        QCOMPARE(failed.count(), 0);
        QCOMPARE(page.conversation(0).size(), size_t(2));

        page.setGpuAvailable(false, QStringLiteral("no GPU here"));
        QCOMPARE(child<QComboBox>(&page, "chatDevice")->findText("cuda"), -1);  // not offered
        page.setTrainingRun(true, DeviceChoice::Auto);
        QVERIFY(!page.trainingHoldsGpu());
        page.setTrainingRun(true, DeviceChoice::Cuda);  // resolved: it holds the GPU after all
        QVERIFY(page.trainingHoldsGpu());
        QVERIFY(!page.releasingGpu());                  // the session is on the CPU: nothing to close
        QCOMPARE(page.sessionDevice(), QString("CPU"));
    }

    // In the studio: a run started from the window tells the Chat page at once which device it asked for, and
    // its end frees the page again (a cuda run with no dataset fails at once, here and on a GPU machine).
    void runInMainWindow() {
        MainWindow w;
        RunConfig c;
        c.model = m_demo.toStdString();
        c.device = DeviceChoice::Cuda;
        c.output_dir = m_tmp.filePath("window-runs/cuda-run").toStdString();
        w.startRun(c);
        QVERIFY(w.session()->isRunning());
        QVERIFY(w.chatPage()->trainingHoldsGpu());
        QTRY_VERIFY_WITH_TIMEOUT(!w.session()->isRunning(), kWaitMs);
        QTRY_VERIFY_WITH_TIMEOUT(!w.chatPage()->trainingHoldsGpu(), kWaitMs);
        w.trainPage()->setGpuAvailable(true, {});  // the window passes system_info's answer on
        QVERIFY(child<QComboBox>(w.chatPage(), "chatDevice")->findText("cuda") >= 0);
    }

    // In the studio: the Chat page is a page of the window and follows the Model page's model.
    void inMainWindow() {
        MainWindow w;
        auto* list = child<QListWidget>(&w, "pageList");
        QCOMPARE(list->item(MainWindow::ChatPageIndex)->text(), QString("Chat"));
        w.showPage(MainWindow::ChatPageIndex);
        QCOMPARE(w.currentPage(), int(MainWindow::ChatPageIndex));
        w.modelPage()->selectModel(m_demo);
        QTRY_COMPARE_WITH_TIMEOUT(w.chatPage()->modelPath(), m_demo, kWaitMs);
        QVERIFY(child<QLabel>(w.chatPage(), "chatModel")->text().contains("demo"));
    }
};

QTEST_MAIN(TestUiChat)
#include "test_ui_chat.moc"
