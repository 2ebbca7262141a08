// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// A small blocking HTTP client over libcurl for the Hub downloader: one request per call, every response
// of a redirect chain's headers kept (the Hub's X-Repo-Commit / X-Linked-Etag / X-Linked-Size are on the first
// response, the file on the last), bodies streamed to a sink only for 200/206 answers.
// Decision: a custom "Authorization" header is sent to the first host only; curl drops it when a redirect
// leaves that host (the Hub redirects LFS files to a CDN that must not see the token).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tandem::hub {

struct HttpRequest {
    std::string url;
    bool head = false;
    bool follow_redirects = true;
    std::vector<std::string> headers;  // "Name: value"
    int64_t range_from = -1;           // >= 0: "Range: bytes=N-"
    // Receives the body of a 200/206 answer; false aborts the transfer. Without a sink the body is kept in
    // HttpResponse::body (at most max_body bytes).
    std::function<bool(const char* data, size_t size, long status)> sink;
    // Polled about once a second and on every chunk; false aborts (cancel).
    std::function<bool()> keep_going;
    long connect_timeout_s = 20;
    long stall_timeout_s = 60;
    size_t max_body = size_t(64) << 20;
};

struct HttpResponse {
    long status = 0;                                         // of the last response
    std::vector<std::map<std::string, std::string>> chain;   // headers of each response, names lower-cased
    std::string body;                                        // when no sink (or the error body, capped)
    int curl_code = 0;                                       // CURLcode; 0 = the transfer completed
    std::string curl_error;
    bool aborted = false;                                    // keep_going or the sink said stop
    // A header of the first / last response ("" when absent).
    std::string first(const std::string& name) const;
    std::string last(const std::string& name) const;
};

HttpResponse http_request(const HttpRequest& request);

// Percent-encodes a repo path for a URL, keeping '/'.
std::string url_encode_path(const std::string& path);
// Percent-encodes everything but unreserved characters (revisions like "refs/pr/1" -> "refs%2Fpr%2F1").
std::string url_encode_component(const std::string& s);

}  // namespace tandem::hub
