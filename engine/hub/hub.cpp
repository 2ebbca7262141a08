// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Hub downloader (see tandem/hub.h for the cache layout and the contract).
// Flow: plan_download lists the repo once (GET api/{models,datasets}/ID/revision/REV?blobs=true: the commit,
// every file with its size, git blob id and LFS sha256) and selects files; download fetches each missing blob
// with GET ID/resolve/COMMIT/PATH (redirects followed; the token goes to the Hub only), appending to
// blobs/X.incomplete from where it stopped (Range), verifies it (sha256 for LFS, git sha1 else), renames it to
// blobs/X, links snapshots/COMMIT/PATH -> ../../blobs/X, and at the end writes refs/REV.
// Known limits: no .locks/ (a Python process downloading the same blob at the same moment may race with
// us; each side verifies what it wrote); the listing is not paginated (the revision endpoint lists the whole
// repo in one answer).
#include "tandem/hub.h"

#include <fnmatch.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "hub/http.h"
#include "tandem/error.h"

namespace tandem::hub {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string_view repo_type_name(RepoType type) noexcept { return type == RepoType::Model ? "model" : "dataset"; }

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

bool env_true(const char* name) {
    std::string v = env(name);
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t b = 0;
    while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    return s.substr(b);
}

std::string folder_prefix(RepoType t) { return t == RepoType::Model ? "models" : "datasets"; }

// URL piece before the repo id: "" for models, "datasets/" for datasets.
std::string url_prefix(RepoType t) { return t == RepoType::Model ? "" : "datasets/"; }

std::string repo_label(RepoType t, std::string_view id) {
    return std::string(repo_type_name(t)) + " " + std::string(id);
}

std::string page_url(const HubOptions& o, RepoType t, std::string_view id) {
    return o.endpoint + "/" + url_prefix(t) + std::string(id);
}

// ----- digests (OpenSSL EVP) ----------------------------------------------------------------------------------
std::string hex(const unsigned char* d, unsigned n) {
    static const char* h = "0123456789abcdef";
    std::string s;
    for (unsigned i = 0; i < n; ++i) s += h[d[i] >> 4], s += h[d[i] & 15];
    return s;
}

// sha256 of the file, or the git blob sha1 ("blob <size>\0" + content) when git_blob.
std::string file_digest(const fs::path& p, bool git_blob, const std::atomic<bool>* cancel) {
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx || !EVP_DigestInit_ex(ctx.get(), git_blob ? EVP_sha1() : EVP_sha256(), nullptr))
        throw_internal("OpenSSL: digest init failed");
    std::ifstream in(p, std::ios::binary);
    if (!in) throw_io(p.string() + ": cannot be read back for verification");
    if (git_blob) {
        const std::string head = "blob " + std::to_string(fs::file_size(p)) + std::string(1, '\0');
        EVP_DigestUpdate(ctx.get(), head.data(), head.size());
    }
    std::vector<char> buf(size_t(1) << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
        if (cancel && cancel->load()) throw Error(ErrorCategory::Cancelled, "download cancelled");
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx.get(), md, &n);
    return hex(md, n);
}

// ----- errors from Hub answers ----------------------------------------------------------------------------------
[[noreturn]] void http_failure(const HttpResponse& r, const HubOptions& o, RepoType t, std::string_view id,
                               std::string_view revision, const std::string& what) {
    const std::string code = r.last("x-error-code");
    const std::string msg = r.last("x-error-message");
    const std::string label = repo_label(t, id);
    const std::string extra = msg.empty() ? std::string() : " (the Hub says: " + msg + ")";
    if (r.status == 401 || r.status == 403) {
        if (code == "GatedRepo" || r.status == 403)
            throw_invalid(label + " is gated or private and " +
                          (o.token.empty() ? std::string("no token is set") : std::string("your token has no access")) +
                          extra + ": accept the licence on the model page " + page_url(o, t, id) +
                          " with your account, then set a token: export HF_TOKEN=hf_... (or put it in " +
                          "~/.cache/huggingface/token, as `hf auth login` does)");
        throw_invalid(label + " was not found, or it is private" + extra + ": check the id (ORG/NAME, as on " +
                      o.endpoint + "); for a private repo set HF_TOKEN to a token that can read it");
    }
    if (r.status == 404) {
        if (code == "RevisionNotFound")
            throw_invalid(label + " has no revision \"" + std::string(revision) + "\"" + extra +
                          ": use a branch, tag or commit that exists (default: main)");
        if (code == "EntryNotFound")
            throw_invalid(label + ": " + what + " does not exist at revision \"" + std::string(revision) + "\"" + extra);
        throw_invalid(label + " (revision \"" + std::string(revision) + "\") was not found" + extra +
                      ": check the id (ORG/NAME" + (t == RepoType::Model ? std::string("; add --dataset for a dataset repo")
                                                                         : std::string()) + ")");
    }
    if (r.curl_code != 0)
        throw_io("cannot reach " + o.endpoint + " for " + what + ": " + r.curl_error +
                 ". Check the network (or a mirror in HF_ENDPOINT); to use only the cache set HF_HUB_OFFLINE=1");
    throw_io(what + ": the Hub answered HTTP " + std::to_string(r.status) + extra + "; try again later");
}

bool retryable(const HttpResponse& r) {
    if (r.aborted) return false;
    // No name resolution or nobody listening: offline, or a wrong HF_ENDPOINT. Retrying only delays the message.
    if (r.curl_code == 5 || r.curl_code == 6 || r.curl_code == 7) return false;  // CURLE_COULDNT_RESOLVE_*, _CONNECT
    if (r.curl_code != 0) return true;  // cut connection, timeout, reset
    return r.status == 429 || r.status >= 500;
}

// Seconds to wait before retry `attempt` (1-based): Retry-After when the Hub gave one, else 1, 2, 4 ... s.
double retry_wait(const HttpResponse& r, int attempt) {
    const std::string ra = r.last("retry-after");
    if (!ra.empty() && std::all_of(ra.begin(), ra.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        return std::atof(ra.c_str());
    return std::min(30.0, static_cast<double>(1 << std::min(attempt - 1, 5)));
}

void sleep_or_cancel(double seconds, const std::atomic<bool>* cancel) {
    const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    while (Clock::now() < until) {
        if (cancel && cancel->load()) throw Error(ErrorCategory::Cancelled, "download cancelled");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

std::vector<std::string> auth_headers(const HubOptions& o) {
    if (o.token.empty()) return {};
    return {"Authorization: Bearer " + o.token};
}

// A GET of a small JSON answer with retries for 429 / 5xx / cut connections.
HttpResponse get_json(const std::string& url, const HubOptions& o, RepoType t, std::string_view id,
                      std::string_view revision, const std::string& what) {
    for (int attempt = 1;; ++attempt) {
        HttpRequest req;
        req.url = url;
        req.headers = auth_headers(o);
        req.headers.push_back("Accept: application/json");
        req.connect_timeout_s = o.connect_timeout_s;
        req.stall_timeout_s = o.stall_timeout_s;
        HttpResponse r = http_request(req);
        if (r.curl_code == 0 && r.status == 200) return r;
        if (retryable(r) && attempt <= o.max_retries) {
            const double wait = retry_wait(r, attempt);
            if (r.status == 429 && wait > o.max_retry_wait_s)
                throw_io(what + ": the Hub asks to wait " + std::to_string(static_cast<int64_t>(wait)) +
                         " s (HTTP 429, rate limited); try again later or set HF_TOKEN (logged-in limits are higher)");
            if (o.notice)
                o.notice(what + ": " + (r.curl_code ? r.curl_error : "HTTP " + std::to_string(r.status)) +
                         ", retrying in " + std::to_string(static_cast<int64_t>(wait + 0.5)) + " s");
            sleep_or_cancel(wait, nullptr);
            continue;
        }
        http_failure(r, o, t, id, revision, what);
    }
}

// ----- selection -------------------------------------------------------------------------------------------------
bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string base_name(std::string_view p) {
    const size_t s = p.rfind('/');
    return std::string(s == std::string_view::npos ? p : p.substr(s + 1));
}

bool is_pickle(std::string_view p) {
    return ends_with(p, ".bin") || ends_with(p, ".pt") || ends_with(p, ".pth") || ends_with(p, ".ckpt") ||
           ends_with(p, ".pkl");
}

bool glob_match(const std::string& pattern, const std::string& path) {
    return fnmatch(pattern.c_str(), path.c_str(), 0) == 0;
}

// ----- cache helpers -----------------------------------------------------------------------------------------------
void write_text_atomic(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    const fs::path tmp = p.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << text;
        if (!out) throw_io(tmp.string() + ": cannot be written (disk full or no permission?)");
    }
    fs::rename(tmp, p);
}

// snapshots/COMMIT/PATH -> ../../blobs/X (one more "../" per folder in PATH), replacing what is there.
void link_snapshot_file(const fs::path& repo_dir, const std::string& commit, const RepoFile& f) {
    const fs::path link = repo_dir / "snapshots" / commit / fs::path(f.path);
    fs::create_directories(link.parent_path());
    std::string target = "../../";
    for (char c : f.path) if (c == '/') target += "../";
    target += "blobs/" + f.blob;
    std::error_code ec;
    fs::remove(link, ec);
    fs::create_symlink(target, link, ec);
    if (ec) {
        // File systems without symlinks (as huggingface_hub does): a copy of the blob.
        fs::copy_file(repo_dir / "blobs" / f.blob, link, fs::copy_options::overwrite_existing, ec);
        if (ec) throw_io(link.string() + ": cannot create the snapshot entry: " + ec.message());
    }
}

// A branch, tag, "refs/pr/N" or commit: it becomes a path under refs/, so nothing that could leave that folder.
bool is_valid_revision(std::string_view r) {
    if (r.empty() || r.size() > 255 || r.front() == '/' || r.back() == '/' || r.front() == '.') return false;
    if (r.find("..") != std::string_view::npos || r.find("//") != std::string_view::npos) return false;
    return std::all_of(r.begin(), r.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
    });
}

bool is_commit_hash(std::string_view s) {
    return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// ----- progress --------------------------------------------------------------------------------------------------
class ProgressMeter {
   public:
    ProgressMeter(const ProgressFn& fn, int64_t total, int files_total, int64_t already)
        : fn_(fn), start_(Clock::now()) {
        p_.bytes_total = total;
        p_.files_total = files_total;
        p_.bytes_done = already;
        samples_.push_back({start_, already});
    }
    void add(int64_t bytes, const std::string& file) {
        std::lock_guard<std::mutex> lock(m_);
        p_.bytes_done += bytes;
        p_.file = file;
        emit(false);
    }
    void file_done() {
        std::lock_guard<std::mutex> lock(m_);
        ++p_.files_done;
        emit(false);
    }
    void finish() {
        std::lock_guard<std::mutex> lock(m_);
        p_.file.clear();
        emit(true);
    }

   private:
    void emit(bool force) {
        const auto now = Clock::now();
        if (!force && now - last_ < std::chrono::milliseconds(200)) return;
        last_ = now;
        samples_.push_back({now, p_.bytes_done});
        while (samples_.size() > 2 && now - samples_.front().first > std::chrono::seconds(5)) samples_.pop_front();
        const double dt = std::chrono::duration<double>(now - samples_.front().first).count();
        p_.bytes_per_s = dt > 0.05 ? static_cast<double>(p_.bytes_done - samples_.front().second) / dt : 0;
        p_.eta_s = p_.bytes_per_s > 0 ? static_cast<double>(p_.bytes_total - p_.bytes_done) / p_.bytes_per_s : -1;
        if (fn_) fn_(p_);
    }
    const ProgressFn& fn_;
    std::mutex m_;
    DownloadProgress p_;
    Clock::time_point start_, last_{};
    std::deque<std::pair<Clock::time_point, int64_t>> samples_;
};

// ----- one file ---------------------------------------------------------------------------------------------------
void fetch_blob(const RepoPlan& plan, const RepoFile& f, const HubOptions& o, ProgressMeter& meter,
                const std::atomic<bool>* cancel) {
    const RepoType t = plan.request.type;
    const std::string& id = plan.request.repo_id;
    const fs::path repo_dir = repo_cache_dir(t, id, o);
    const fs::path blob = repo_dir / "blobs" / f.blob;
    const fs::path part = blob.string() + ".incomplete";
    fs::create_directories(blob.parent_path());
    const std::string url = o.endpoint + "/" + url_prefix(t) + id + "/resolve/" + plan.commit + "/" + url_encode_path(f.path);
    const auto cancelled = [&] { return cancel && cancel->load(); };

    for (int attempt = 1;; ++attempt) {
        std::error_code ec;
        int64_t have = fs::exists(part, ec) ? static_cast<int64_t>(fs::file_size(part, ec)) : 0;
        if (f.size >= 0 && have > f.size) {
            fs::remove(part, ec);
            have = 0;
        }
        if (f.size >= 0 && have == f.size && f.size > 0) break;  // complete from an earlier run: verify below
        std::FILE* out = std::fopen(part.c_str(), have > 0 ? "ab" : "wb");
        if (!out) throw_io(part.string() + ": cannot be written (disk full or no permission?)");
        std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(out, std::fclose);
        bool first_chunk = true;
        bool write_failed = false;
        HttpRequest req;
        req.url = url;
        req.headers = auth_headers(o);
        req.range_from = have;
        req.connect_timeout_s = o.connect_timeout_s;
        req.stall_timeout_s = o.stall_timeout_s;
        req.keep_going = [&] { return !cancelled(); };
        req.sink = [&](const char* data, size_t n, long status) {
            if (first_chunk) {
                first_chunk = false;
                if (status == 200 && have > 0) {  // the server ignored the range: start over
                    meter.add(-have, f.path);
                    closer.reset(std::fopen(part.c_str(), "wb"));
                    out = closer.get();
                    have = 0;
                    if (!out) {
                        write_failed = true;
                        return false;
                    }
                }
            }
            if (std::fwrite(data, 1, n, out) != n) {
                write_failed = true;
                return false;
            }
            meter.add(static_cast<int64_t>(n), f.path);
            return true;
        };
        const HttpResponse r = http_request(req);
        closer.reset();
        if (cancelled()) throw Error(ErrorCategory::Cancelled, "download cancelled (" + f.path + " is kept as " +
                                                                   part.filename().string() + " and resumes next time)");
        if (write_failed) throw_io(part.string() + ": writing failed (disk full?)");
        if (r.curl_code == 0 && (r.status == 200 || r.status == 206)) {
            const int64_t now = static_cast<int64_t>(fs::file_size(part, ec));
            if (f.size < 0 || now == f.size) break;
            if (now > f.size) {
                fs::remove(part, ec);
                throw_invalid(repo_label(t, id) + ": " + f.path + " is larger than the " + std::to_string(f.size) +
                              " bytes the Hub listed; the file was removed; try again");
            }
            // Short body without an error: treat as a cut connection.
        } else if (r.status == 416) {
            fs::remove(part, ec);  // our partial file does not fit the server's: start over
        } else if (r.curl_code == 0 && !retryable(r)) {
            http_failure(r, o, t, id, plan.request.revision, f.path);
        }
        if (attempt > o.max_retries) {
            if (r.curl_code != 0 || r.status >= 400) http_failure(r, o, t, id, plan.request.revision, f.path);
            throw_io(repo_label(t, id) + ": " + f.path + " stayed incomplete after " + std::to_string(attempt) +
                     " tries; run the download again to resume");
        }
        const double wait = r.status == 429 || r.status >= 500 ? retry_wait(r, attempt) : std::min(8.0, 0.5 * attempt);
        if (r.status == 429 && wait > o.max_retry_wait_s)
            throw_io(f.path + ": the Hub asks to wait " + std::to_string(static_cast<int64_t>(wait)) +
                     " s (HTTP 429, rate limited); try again later or set HF_TOKEN");
        if (o.notice)
            o.notice(f.path + ": " + (r.curl_code ? r.curl_error : "HTTP " + std::to_string(r.status)) +
                     ", resuming in " + std::to_string(wait).substr(0, 3) + " s");
        sleep_or_cancel(wait, cancel);
    }

    // Verify, then publish under the blob's name.
    const std::string got = file_digest(part, !f.lfs, cancel);
    if (got != f.blob) {
        std::error_code ec;
        fs::remove(part, ec);
        throw_invalid(repo_label(t, id) + ": " + f.path + " failed its " + (f.lfs ? "sha256" : "git sha1") +
                      " check (expected " + f.blob + ", got " + got +
                      "); the download was removed and nothing was added to the snapshot. Try again; if it "
                      "repeats, a proxy or mirror (HF_ENDPOINT) is altering the file");
    }
    fs::rename(part, blob);
}

}  // namespace

// ----- public API -------------------------------------------------------------------------------------------------

HubOptions hub_options_from_env() {
    HubOptions o;
    if (std::string e = env("HF_ENDPOINT"); !e.empty()) o.endpoint = e;
    while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
    fs::path home;
    if (std::string h = env("HF_HOME"); !h.empty()) {
        home = h;
    } else if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) {
        home = fs::path(x) / "huggingface";
    } else {
        home = fs::path(env("HOME").empty() ? std::string("/tmp") : env("HOME")) / ".cache" / "huggingface";
    }
    if (std::string c = env("HF_HUB_CACHE"); !c.empty()) o.cache_dir = c;
    else if (std::string c2 = env("HUGGINGFACE_HUB_CACHE"); !c2.empty()) o.cache_dir = c2;
    else o.cache_dir = home / "hub";
    o.token = trim(env("HF_TOKEN"));
    if (o.token.empty()) o.token = trim(env("HUGGING_FACE_HUB_TOKEN"));
    if (o.token.empty()) {
        const fs::path tp = env("HF_TOKEN_PATH").empty() ? home / "token" : fs::path(env("HF_TOKEN_PATH"));
        std::ifstream in(tp);
        if (in) {
            std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            o.token = trim(s);
        }
    }
    o.offline = env_true("HF_HUB_OFFLINE");
    return o;
}

bool is_repo_id(std::string_view id) noexcept {
    if (id.empty() || id.size() > 96 * 2 + 1) return false;
    const size_t slash = id.find('/');
    if (slash != std::string_view::npos && id.find('/', slash + 1) != std::string_view::npos) return false;
    auto part_ok = [](std::string_view p) {
        if (p.empty() || p.size() > 96) return false;
        if (p.front() == '-' || p.front() == '.' || p.back() == '-' || p.back() == '.') return false;
        if (p.find("--") != std::string_view::npos || p.find("..") != std::string_view::npos) return false;
        return std::all_of(p.begin(), p.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
        });
    };
    if (slash == std::string_view::npos) return part_ok(id);
    return part_ok(id.substr(0, slash)) && part_ok(id.substr(slash + 1));
}

bool needed_for_training(RepoType type, std::string_view p) noexcept {
    if (type == RepoType::Dataset) {
        for (const char* e : {".parquet", ".jsonl", ".json", ".csv", ".tsv", ".txt", ".ndjson"})
            if (ends_with(p, e)) return base_name(p) != "dataset_infos.json" && base_name(p) != "dataset_info.json";
        return false;
    }
    if (p.rfind("additional_chat_templates/", 0) == 0 && ends_with(p, ".jinja")) return true;
    if (p.find('/') != std::string_view::npos) return false;  // root files only (not original/, onnx/, ...)
    for (const char* n : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                          "special_tokens_map.json", "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json",
                          "chat_template.json", "chat_template.jinja"})
        if (p == n) return true;
    return ends_with(p, ".safetensors") || ends_with(p, ".safetensors.index.json");
}

fs::path repo_cache_dir(RepoType type, std::string_view repo_id, const HubOptions& options) {
    std::string name = folder_prefix(type) + "--";
    for (char c : repo_id) name += c == '/' ? std::string("--") : std::string(1, c);
    return options.cache_dir / name;
}

std::optional<fs::path> cached_snapshot(RepoType type, std::string_view repo_id, std::string_view revision,
                                        const HubOptions& options) {
    if (!is_repo_id(repo_id) || !is_valid_revision(revision)) return std::nullopt;
    const fs::path dir = repo_cache_dir(type, repo_id, options);
    std::string commit(revision);
    std::error_code ec;
    const fs::path ref = dir / "refs" / fs::path(std::string(revision));
    if (fs::is_regular_file(ref, ec)) {
        std::ifstream in(ref);
        std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        commit = trim(s);
    } else if (!is_commit_hash(revision)) {
        return std::nullopt;
    }
    if (!is_commit_hash(commit)) return std::nullopt;
    const fs::path snap = dir / "snapshots" / commit;
    if (!fs::is_directory(snap, ec) || fs::is_empty(snap, ec)) return std::nullopt;
    return snap;
}

RepoPlan plan_download(const DownloadRequest& request, const HubOptions& o) {
    const RepoType t = request.type;
    const std::string& id = request.repo_id;
    if (!is_repo_id(id))
        throw_invalid("\"" + id + "\" is not a Hugging Face repo id: expected ORG/NAME (letters, digits, '-', '_', "
                      "'.'), e.g. Qwen/Qwen3-0.6B");
    if (!is_valid_revision(request.revision))
        throw_invalid("revision \"" + request.revision + "\" is not valid: use a branch, tag or commit (letters, "
                      "digits, '-', '_', '.', '/'), e.g. main");
    RepoPlan plan;
    plan.request = request;
    const fs::path repo_dir = repo_cache_dir(t, id, o);
    std::vector<RepoFile> all;

    if (o.offline) {
        // HF_HUB_OFFLINE: what the cache holds at this revision, nothing contacted.
        const auto snap = cached_snapshot(t, id, request.revision, o);
        if (!snap)
            throw_invalid(repo_label(t, id) + " (revision \"" + request.revision + "\") is not in the cache " +
                          o.cache_dir.string() + " and HF_HUB_OFFLINE=1 forbids downloading it: unset HF_HUB_OFFLINE "
                          "(or download it on a machine with network and copy the cache)");
        plan.commit = snap->filename().string();
        for (auto it = fs::recursive_directory_iterator(*snap); it != fs::recursive_directory_iterator(); ++it) {
            if (it->is_directory()) continue;
            RepoFile f;
            f.path = it->path().lexically_relative(*snap).generic_string();
            std::error_code ec;
            f.size = static_cast<int64_t>(fs::file_size(it->path(), ec));
            const fs::path target = fs::is_symlink(it->symlink_status()) ? fs::read_symlink(it->path()) : fs::path();
            f.blob = target.filename().string();
            f.cached = true;
            all.push_back(std::move(f));
        }
    } else {
        const std::string url = o.endpoint + "/api/" + folder_prefix(t) + "/" + id + "/revision/" +
                                url_encode_component(request.revision) + "?blobs=true";
        const HttpResponse r = get_json(url, o, t, id, request.revision, "the file list of " + repo_label(t, id));
        const json info = json::parse(r.body, nullptr, false);
        if (info.is_discarded() || !info.is_object() || !info.contains("sha") || !info["sha"].is_string() ||
            !info.contains("siblings") || !info["siblings"].is_array())
            throw_io(o.endpoint + " answered the file list of " + repo_label(t, id) +
                     " with something that is not the Hub's JSON (a captive portal or a wrong HF_ENDPOINT?)");
        plan.commit = info["sha"].get<std::string>();
        if (!is_commit_hash(plan.commit)) throw_io("the Hub's answer names no valid commit for " + repo_label(t, id));
        for (const auto& s : info["siblings"]) {
            if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
            RepoFile f;
            f.path = s["rfilename"].get<std::string>();
            if (f.path.empty() || f.path.front() == '/' || f.path.find("..") != std::string::npos ||
                f.path.find('\\') != std::string::npos)
                throw_io(repo_label(t, id) + ": the file list holds an unsafe path \"" + f.path + "\"");
            if (s.contains("size") && s["size"].is_number_integer()) f.size = s["size"].get<int64_t>();
            if (s.contains("blobId") && s["blobId"].is_string()) f.blob = s["blobId"].get<std::string>();
            if (s.contains("lfs") && s["lfs"].is_object()) {
                const auto& l = s["lfs"];
                if (l.contains("sha256") && l["sha256"].is_string()) {
                    f.lfs = true;
                    f.blob = l["sha256"].get<std::string>();
                }
                if (l.contains("size") && l["size"].is_number_integer()) f.size = l["size"].get<int64_t>();
            }
            if (f.blob.empty() || !std::all_of(f.blob.begin(), f.blob.end(), [](char c) {
                    return std::isxdigit(static_cast<unsigned char>(c));
                }))
                throw_io(repo_label(t, id) + ": the file list gives no blob id for " + f.path +
                         " (an old mirror? HF_ENDPOINT=" + o.endpoint + ")");
            std::error_code ec;
            const fs::path b = repo_dir / "blobs" / f.blob;
            f.cached = fs::is_regular_file(b, ec) && (f.size < 0 || static_cast<int64_t>(fs::file_size(b, ec)) == f.size);
            all.push_back(std::move(f));
        }
    }

    // Selection.
    const bool by_glob = !request.include.empty();
    bool has_safetensors = false, has_pickle = false;
    std::string pickle_example;
    for (const auto& f : all) {
        has_safetensors = has_safetensors || ends_with(f.path, ".safetensors");
        if (is_pickle(f.path) && pickle_example.empty()) pickle_example = f.path;
        has_pickle = has_pickle || is_pickle(f.path);
    }
    if (t == RepoType::Model && !by_glob && !has_safetensors && has_pickle)
        throw_unsupported(repo_label(t, id) + " has only pickle weights (" + pickle_example +
                          "): loading them runs code, so Tandem reads safetensors only. Look for a safetensors "
                          "version of this model (often the same repo at another revision, e.g. --revision "
                          "refs/pr/N from the Hub's safetensors conversion bot), or convert it yourself");
    for (auto& f : all) {
        bool take = false;
        if (by_glob) {
            for (const auto& g : request.include) take = take || glob_match(g, f.path);
        } else {
            take = needed_for_training(t, f.path);
        }
        if (!take) {
            plan.skipped.push_back(f.path);
            continue;
        }
        plan.total_bytes += std::max<int64_t>(f.size, 0);
        if (f.cached) plan.cached_bytes += std::max<int64_t>(f.size, 0);
        plan.files.push_back(std::move(f));
    }
    if (plan.files.empty()) {
        std::string listed;
        for (size_t i = 0; i < all.size() && i < 12; ++i) listed += (i ? ", " : "") + all[i].path;
        if (all.size() > 12) listed += ", ...";
        throw_invalid(repo_label(t, id) + ": no file matches " +
                      (by_glob ? std::string("the --include patterns")
                               : t == RepoType::Model ? std::string("what training needs (config.json, *.safetensors, tokenizer files)")
                                                      : std::string("a dataset file (*.parquet, *.jsonl, *.json, *.csv, *.tsv, *.txt)")) +
                      "; the repo holds: " + (listed.empty() ? std::string("nothing") : listed));
    }
    if (t == RepoType::Model && !by_glob) {
        const bool has_config = std::any_of(plan.files.begin(), plan.files.end(), [](const RepoFile& f) { return f.path == "config.json"; });
        if (!has_config)
            throw_unsupported(repo_label(t, id) + " has no config.json at its root: it is not a transformers model "
                              "(an adapter, GGUF or other format?); Tandem trains full transformers checkpoints");
    }
    plan.snapshot = repo_dir / "snapshots" / plan.commit;
    return plan;
}

fs::path download(const RepoPlan& plan, const HubOptions& o, const ProgressFn& progress, const std::atomic<bool>* cancel) {
    const RepoType t = plan.request.type;
    const fs::path repo_dir = repo_cache_dir(t, plan.request.repo_id, o);
    std::vector<const RepoFile*> todo;
    for (const auto& f : plan.files)
        if (!f.cached) todo.push_back(&f);
    if (!todo.empty() && o.offline)
        throw_invalid(repo_label(t, plan.request.repo_id) + ": files are missing from the cache and HF_HUB_OFFLINE=1");
    fs::create_directories(repo_dir / "blobs");

    // Bytes already in .incomplete files count as done for the meter.
    int64_t already = plan.cached_bytes;
    for (const RepoFile* f : todo) {
        std::error_code ec;
        const fs::path part = repo_dir / "blobs" / (f->blob + ".incomplete");
        if (fs::exists(part, ec)) {
            const int64_t have = static_cast<int64_t>(fs::file_size(part, ec));
            if (f->size < 0 || have <= f->size) already += have;
        }
    }
    ProgressMeter meter(progress, plan.total_bytes, static_cast<int>(plan.files.size()), already);
    for (size_t i = 0; i < plan.files.size() - todo.size(); ++i) meter.file_done();

    // Publish cached files at once (their blobs are complete).
    for (const auto& f : plan.files)
        if (f.cached) link_snapshot_file(repo_dir, plan.commit, f);

    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    std::mutex err_m;
    std::exception_ptr first_error;
    // Workers stop on the user's cancel or on another worker's failure.
    std::atomic<bool> combined{false};
    auto worker = [&] {
        for (;;) {
            if (stop.load() || (cancel && cancel->load())) return;
            const size_t k = next.fetch_add(1);
            if (k >= todo.size()) return;
            try {
                fetch_blob(plan, *todo[k], o, meter, &combined);
                link_snapshot_file(repo_dir, plan.commit, *todo[k]);
                meter.file_done();
            } catch (...) {
                std::lock_guard<std::mutex> lock(err_m);
                if (!first_error) first_error = std::current_exception();
                stop = true;
                combined = true;
                return;
            }
        }
    };
    const int n_threads = std::max(1, std::min<int>(o.parallel_files, static_cast<int>(todo.size())));
    std::vector<std::thread> threads;
    std::atomic<bool> watching{true};
    // Forward the user's cancel flag into the flag the transfers poll.
    std::thread watcher([&] {
        while (watching.load()) {
            if (cancel && cancel->load()) combined = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    for (int i = 0; i < n_threads && !todo.empty(); ++i) threads.emplace_back(worker);
    for (auto& th : threads) th.join();
    watching = false;
    watcher.join();
    if (cancel && cancel->load() && !first_error)
        throw Error(ErrorCategory::Cancelled, "download cancelled; run it again to resume");
    if (first_error) {
        // A cancel that made other workers stop is reported as the cancel, not as their side effect.
        if (cancel && cancel->load()) throw Error(ErrorCategory::Cancelled, "download cancelled; run it again to resume");
        std::rethrow_exception(first_error);
    }
    meter.finish();
    if (plan.request.revision != plan.commit)
        write_text_atomic(repo_dir / "refs" / fs::path(plan.request.revision), plan.commit);
    return plan.snapshot;
}

fs::path download(const DownloadRequest& request, const HubOptions& options, const ProgressFn& progress,
                  const std::atomic<bool>* cancel) {
    return download(plan_download(request, options), options, progress, cancel);
}

fs::path resolve_path_or_repo(std::string_view path_or_id, RepoType type, const HubOptions& o,
                              const ProgressFn& progress, const std::atomic<bool>* cancel) {
    const std::string s(path_or_id);
    std::error_code ec;
    if (fs::exists(fs::path(s), ec)) return s;
    DownloadRequest req;
    req.type = type;
    req.repo_id = s;
    if (const size_t at = s.find('@'); at != std::string::npos) {
        req.repo_id = s.substr(0, at);
        req.revision = s.substr(at + 1);
    }
    // A name that looks like a file (a data extension) or that cannot be a repo id is a missing path.
    if (!is_repo_id(req.repo_id) || req.repo_id.find('/') == std::string::npos ||
        (type == RepoType::Dataset && needed_for_training(RepoType::Dataset, req.repo_id)))
        throw_invalid(s + ": no such file or folder" +
                      (type == RepoType::Model ? std::string(" (nor a Hugging Face repo id ORG/NAME)") : std::string()));
    fs::path snap;
    const auto as_repo = [&](const Error& e) {
        return Error(e.category(), s + ": no such file or folder; as a Hub repo id: " + e.what());
    };
    if (o.offline) {
        try {
            snap = plan_download(req, o).snapshot;  // from the cache alone; names what is missing
        } catch (const Error& e) {
            throw as_repo(e);
        }
    } else {
        RepoPlan plan;
        try {
            plan = plan_download(req, o);
        } catch (const Error& e) {
            if (e.category() == ErrorCategory::InvalidInput) throw as_repo(e);
            // The Hub cannot be reached: a cached snapshot is used, as huggingface_hub does.
            if (e.category() != ErrorCategory::Io) throw;
            const auto cached = cached_snapshot(type, req.repo_id, req.revision, o);
            if (!cached) throw as_repo(e);
            if (o.notice) o.notice(std::string(e.what()) + "; using the cached snapshot " + cached->string());
            snap = *cached;
        }
        if (snap.empty()) snap = download(plan, o, progress, cancel);
    }
    if (type == RepoType::Model) return snap;
    // A dataset repo: the one data file, or the one whose name says "train".
    std::vector<std::string> files, train;
    for (auto it = fs::recursive_directory_iterator(snap); it != fs::recursive_directory_iterator(); ++it) {
        if (it->is_directory()) continue;
        const std::string rel = it->path().lexically_relative(snap).generic_string();
        if (!needed_for_training(RepoType::Dataset, rel)) continue;
        files.push_back(rel);
        if (base_name(rel).find("train") != std::string::npos) train.push_back(rel);
    }
    std::sort(files.begin(), files.end());
    if (files.size() == 1) return snap / files[0];
    if (train.size() == 1) return snap / train[0];
    std::string listed;
    for (size_t i = 0; i < files.size() && i < 10; ++i) listed += "\n  " + (snap / files[i]).string();
    throw_invalid(repo_label(type, req.repo_id) + " holds " + std::to_string(files.size()) +
                  " data files and Tandem trains on one: pass the one you want as --dataset PATH:" + listed);
}

std::string format_bytes(int64_t b) {
    const char* units[] = {"B", "KB", "MB", "GB", "TB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1000 && u < 4) v /= 1000, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}

}  // namespace tandem::hub
