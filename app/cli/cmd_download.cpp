// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli download ORG/NAME [--revision R] [--dataset] [--include GLOB]... [--dry-run] [--json]`
// Downloads a model (or dataset) repo from the Hugging Face Hub into the standard Hugging Face cache (HF_HOME /
// HF_HUB_CACHE; files shared with Python tools) and prints the snapshot folder on stdout. Progress on stderr;
// Ctrl-C stops it (exit 130) and the next run resumes. --dry-run prints the size preview only.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "hub_progress.h"
#include "tandem/error.h"
#include "tandem/hub.h"

namespace tandem::cli {

Run add_download_command(CLI::App& app) {
    struct Opts {
        std::string repo, revision = "main";
        std::vector<std::string> include;
        bool dataset = false, dry_run = false, json = false;
        int parallel = 4;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("download", "Download a model or dataset from the Hugging Face Hub into its cache");
    sub->add_option("repo", o->repo, "repo id: ORG/NAME")->required();
    sub->add_option("--revision", o->revision, "branch, tag or commit")->capture_default_str();
    sub->add_flag("--dataset", o->dataset, "a dataset repo (default: a model repo)");
    sub->add_option("--include", o->include,
                    "only files matching this glob (repeatable; replaces the default: what training needs)");
    sub->add_flag("--dry-run", o->dry_run, "list the files and sizes, download nothing");
    sub->add_option("--parallel", o->parallel, "files downloaded at once")->capture_default_str();
    sub->add_flag("--json", o->json, "print the plan (and the snapshot folder) as JSON");
    return [o]() {
        if (o->parallel < 1 || o->parallel > 64) throw_invalid("--parallel must be in 1..64");
        hub::HubOptions opt = cli_hub_options();
        opt.parallel_files = o->parallel;
        hub::DownloadRequest req;
        req.type = o->dataset ? hub::RepoType::Dataset : hub::RepoType::Model;
        req.repo_id = o->repo;
        req.revision = o->revision;
        req.include = o->include;
        const hub::RepoPlan plan = hub::plan_download(req, opt);
        std::fprintf(stderr, "%s %s @ %s (commit %s): %zu files, %s (%s in the cache)\n",
                     std::string(hub::repo_type_name(req.type)).c_str(), req.repo_id.c_str(), req.revision.c_str(),
                     plan.commit.c_str(), plan.files.size(), hub::format_bytes(plan.total_bytes).c_str(),
                     hub::format_bytes(plan.cached_bytes).c_str());
        nlohmann::json j;
        if (o->json) {
            j = {{"repo", req.repo_id}, {"type", hub::repo_type_name(req.type)}, {"revision", req.revision},
                 {"commit", plan.commit}, {"total_bytes", plan.total_bytes}, {"cached_bytes", plan.cached_bytes},
                 {"skipped", plan.skipped}, {"files", nlohmann::json::array()}};
            for (const auto& f : plan.files)
                j["files"].push_back({{"path", f.path}, {"size", f.size}, {"lfs", f.lfs}, {"cached", f.cached}});
        }
        if (o->dry_run) {
            if (o->json) {
                std::cout << j.dump(2) << "\n";
            } else {
                for (const auto& f : plan.files)
                    std::cout << (f.cached ? "cached  " : "        ") << hub::format_bytes(f.size) << "\t" << f.path << "\n";
            }
            return 0;
        }
        const HubSigint sigint;
        const auto snapshot = hub::download(plan, opt, stderr_progress(), &g_hub_cancel);
        if (o->json) {
            j["snapshot"] = snapshot.string();
            std::cout << j.dump(2) << "\n";
        } else {
            std::cout << snapshot.string() << "\n";
        }
        return 0;
    };
}

}  // namespace tandem::cli
