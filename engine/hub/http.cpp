// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// libcurl wrapper (see http.h). curl_global_init runs once, thread-safely, on first use.
#include "hub/http.h"

#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <memory>
#include <mutex>

#include <curl/curl.h>

#include "tandem/error.h"

namespace tandem::hub {

namespace {

struct CurlDeleter {
    void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
    void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

void global_init() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct State {
    const HttpRequest* req;
    HttpResponse* resp;
    bool aborted = false;
};

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t b = 0;
    while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    return s.substr(b);
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* st = static_cast<State*>(user);
    const std::string line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {
        st->resp->chain.emplace_back();
        const size_t sp = line.find(' ');
        st->resp->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
        return size * n;
    }
    const size_t colon = line.find(':');
    if (colon != std::string::npos && !st->resp->chain.empty())
        st->resp->chain.back()[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
    return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* st = static_cast<State*>(user);
    const size_t bytes = size * n;
    const long status = st->resp->status;
    if (st->req->sink && (status == 200 || status == 206)) {
        if (!st->req->sink(data, bytes, status)) {
            st->aborted = true;
            return 0;  // CURLE_WRITE_ERROR
        }
    } else {
        const size_t room = st->req->max_body > st->resp->body.size() ? st->req->max_body - st->resp->body.size() : 0;
        if (bytes > room && (status == 200 || status == 206) && !st->req->sink) {
            st->resp->curl_error = "the answer is larger than " + std::to_string(st->req->max_body) + " bytes";
            st->aborted = true;
            return 0;
        }
        st->resp->body.append(data, std::min(bytes, room));
    }
    if (st->req->keep_going && !st->req->keep_going()) {
        st->aborted = true;
        return 0;
    }
    return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* st = static_cast<State*>(user);
    if (st->req->keep_going && !st->req->keep_going()) {
        st->aborted = true;
        return 1;
    }
    return 0;
}

}  // namespace

std::string HttpResponse::first(const std::string& name) const {
    if (chain.empty()) return {};
    auto it = chain.front().find(name);
    return it == chain.front().end() ? std::string() : it->second;
}

std::string HttpResponse::last(const std::string& name) const {
    if (chain.empty()) return {};
    auto it = chain.back().find(name);
    return it == chain.back().end() ? std::string() : it->second;
}

HttpResponse http_request(const HttpRequest& req) {
    global_init();
    HttpResponse resp;
    std::unique_ptr<CURL, CurlDeleter> c(curl_easy_init());
    if (!c) throw_internal("libcurl: curl_easy_init failed");
    State st{&req, &resp};
    curl_slist* raw = nullptr;
    for (const auto& h : req.headers) raw = curl_slist_append(raw, h.c_str());
    std::unique_ptr<curl_slist, SlistDeleter> headers(raw);
    CURL* h = c.get();
    curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(h, CURLOPT_USERAGENT, "tandem/" TANDEM_VERSION);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, req.follow_redirects ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, req.connect_timeout_s);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, req.stall_timeout_s);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "identity");  // sizes and ranges are of the raw bytes
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &st);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &st);
    if (req.head) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    // Loopback never goes through a proxy (mirrors and tests on this machine), whatever http_proxy says; the
    // user's no_proxy list is kept.
    std::string no_proxy = "localhost,127.0.0.1,::1";
    for (const char* name : {"no_proxy", "NO_PROXY"})
        if (const char* v = std::getenv(name); v && *v) {
            no_proxy += std::string(",") + v;
            break;
        }
    curl_easy_setopt(h, CURLOPT_NOPROXY, no_proxy.c_str());
    const std::string range = req.range_from >= 0 ? std::to_string(req.range_from) + "-" : std::string();
    if (req.range_from > 0) curl_easy_setopt(h, CURLOPT_RANGE, range.c_str());
    char err[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    const CURLcode rc = curl_easy_perform(h);
    resp.curl_code = static_cast<int>(rc);
    resp.aborted = st.aborted;
    if (rc != CURLE_OK && resp.curl_error.empty()) resp.curl_error = err[0] ? err : curl_easy_strerror(rc);
    return resp;
}

std::string url_encode_path(const std::string& path) {
    std::string out;
    static const char* hex = "0123456789ABCDEF";
    for (unsigned char ch : path) {
        if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' || ch == '/') {
            out += static_cast<char>(ch);
        } else {
            out += '%';
            out += hex[ch >> 4];
            out += hex[ch & 15];
        }
    }
    return out;
}

std::string url_encode_component(const std::string& s) {
    std::string out = url_encode_path(s);
    std::string r;
    for (char ch : out) r += ch == '/' ? std::string("%2F") : std::string(1, ch);
    return r;
}

}  // namespace tandem::hub
