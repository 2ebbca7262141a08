// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Models in the local Hugging Face hub cache, for the Model page's "found on this machine" list.
// Decisions a reader must know:
//  - The cache folder follows huggingface_hub: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
//    (the legacy $HUGGINGFACE_HUB_CACHE is honoured too).
//  - A cached repo is models--<org>--<name>/snapshots/<revision>/; the snapshot refs/main points to is
//    preferred, else the most recently modified one. Only snapshots holding a config.json are listed: a
//    partial download without it is not a model folder.
//  - Scanning touches the disk (the cache may sit on a network drive), so callers run it off the GUI thread.
#pragma once

#include <QList>
#include <QString>

namespace tandem::ui {

struct HfCacheModel {
    QString repoId;    // "Qwen/Qwen3-0.6B"
    QString snapshot;  // absolute path of the snapshot folder (what inspect_model_dir takes)
};

// The hub cache folder the environment selects (it may not exist).
QString hfHubCacheDir();

// Every cached model snapshot under `cacheDir` (default: hfHubCacheDir()), sorted by repo id.
QList<HfCacheModel> scanHfCache(const QString& cacheDir = hfHubCacheDir());

// A short name for a model folder: "org/name" for a hub cache snapshot; else the repo id its config.json
// names in `_name_or_path` (when that is a repo id, not a local path); else the folder's own name, with its
// parent's in front when the name alone says nothing ("babyllama-tok105/hf", not "hf"). Reads config.json
// (a small file).
QString modelDisplayName(const QString& folder);

}  // namespace tandem::ui
