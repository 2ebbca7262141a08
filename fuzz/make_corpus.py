#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Regenerates the seed corpora in fuzz/corpus/ (small files only, a few KB each).

Sources: the committed test fixtures (tests/fixtures, tests/*.inc, tests/test_model_config.cpp), the
built-in chat templates (resources/chat_templates), and small excerpts cut from the shared test assets
(../shared/assets: a few hundred tokens of real tokenizers, a few records of real datasets, the chat
templates of real tokenizer_config.json files). Hand-written seeds cover formats no fixture has (CSV/TSV,
MoE configs, PEFT variants). Run from the repository root: python3 fuzz/make_corpus.py
"""
import json, os, re, struct, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.environ.get('TANDEM_ASSETS', os.path.join(ROOT, '..', 'shared', 'assets'))
C = os.path.join(ROOT, 'fuzz', 'corpus')


def out(target, name, data):
    os.makedirs(os.path.join(C, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    assert len(data) <= 16384, (target, name, len(data))
    with open(os.path.join(C, target, name), 'wb') as f:
        f.write(data)


def compact(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(',', ':'))


def asset_json(rel):
    with open(os.path.join(ASSETS, rel), encoding='utf-8') as f:
        return json.load(f)


# --- safetensors ----------------------------------------------------------------------------------------
def st(header, data=b''):
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    return struct.pack('<Q', len(h)) + h + data


for f in ('torch_written', 'tandem_written'):
    with open(os.path.join(ROOT, 'tests/fixtures/safetensors', f + '.safetensors'), 'rb') as fh:
        out('safetensors', f + '.safetensors', fh.read())
out('safetensors', 'scalar_f64_meta.safetensors',
    st({"__metadata__": {"format": "pt"}, "s": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]}}, struct.pack('<d', 1.5)))
out('safetensors', 'bf16_f16_i8.safetensors',
    st({"a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}, "b": {"dtype": "F16", "shape": [3], "data_offsets": [8, 14]},
        "c": {"dtype": "I8", "shape": [2], "data_offsets": [14, 16]}}, bytes(range(16))))
out('safetensors', 'empty_tensor.safetensors',
    st({"z": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]}, "u": {"dtype": "U64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8)))
out('safetensors', 'empty_header.safetensors', st({}))

# --- model.safetensors.index.json (the two shards are written by fuzz_safetensors_index.cpp itself) --------
s1, s2 = 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'
out('safetensors_index', 'two_shards.json', json.dumps({"metadata": {"total_size": 48}, "weight_map": {
    "lm_head.weight": s2, "model.embed_tokens.weight": s1, "model.norm.weight": s1}}, indent=2))
out('safetensors_index', 'subset.json', json.dumps({"weight_map": {"model.norm.weight": s1}}))
out('safetensors_index', 'missing_tensor.json', json.dumps({"weight_map": {"model.layers.0.x": s2}}))

# --- config.json ----------------------------------------------------------------------------------------
for m in ('llama', 'mistral', 'mistral-window', 'phi3', 'qwen2', 'qwen3'):
    with open(os.path.join(ROOT, 'tests/fixtures/models', m, 'config.json'), 'rb') as f:
        out('model_config', m + '.json', f.read())
src = open(os.path.join(ROOT, 'tests/test_model_config.cpp')).read()
for name in ('kLlama32_1B', 'kQwen3_30B_A3B', 'kMixtral8x7B', 'kGptOss20B', 'kTinyQwen3'):
    m = re.search(r'const char\* ' + name + r' = R"\((.*?)\)";', src, re.S)
    out('model_config', name[1:].lower() + '.json', json.dumps(json.loads(m.group(1)), indent=1) + '\n')

# --- tokenizer.json: the real pipelines with the vocabulary cut to its first ids ------------------------------
def cut_tokenizer(rel, keep_ids, keep_merges, keep_added=8):
    d = asset_json(rel)
    m = d['model']
    vocab = {t: i for t, i in m['vocab'].items() if i < keep_ids}
    merges = []
    for mg in m['merges']:
        a, b = mg.split(' ', 1) if isinstance(mg, str) else mg
        if a in vocab and b in vocab and (a + b) in vocab:
            merges.append(mg)
        if len(merges) >= keep_merges:
            break
    m['vocab'] = vocab
    m['merges'] = merges
    d['added_tokens'] = d['added_tokens'][:keep_added]
    return compact(d)


out('tokenizer', 'babyllama_sentencepiece.json', cut_tokenizer('babyllama-tok105/hf/tokenizer.json', 105, 100))
out('tokenizer', 'llama3_bytelevel_cut.json', cut_tokenizer('tokenizer-llama3/tokenizer.json', 300, 60, 4))
out('tokenizer', 'qwen3_bytelevel_cut.json', cut_tokenizer('tokenizer-qwen3/tokenizer.json', 300, 60, 6))
out('tokenizer', 'mistral_bytefallback_cut.json', cut_tokenizer('tokenizer-mistral-v0.1/tokenizer.json', 300, 60, 3))
out('tokenizer', 'minimal.json', compact({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}))

# --- tokenizer_config.json: the special tokens and chat templates of real configs -------------------------
def cut_config(rel, drop=('added_tokens_decoder',)):
    d = asset_json(rel)
    return json.dumps({k: v for k, v in d.items() if k not in drop}, ensure_ascii=False, indent=1)


out('tokenizer_config', 'qwen3.json', cut_config('tokenizer-qwen3/tokenizer_config.json'))
out('tokenizer_config', 'llama3.json', cut_config('tokenizer-llama3/tokenizer_config.json'))
out('tokenizer_config', 'mistral.json', cut_config('tokenizer-mistral-v0.1/tokenizer_config.json'))
out('tokenizer_config', 'added_token_objects.json', json.dumps({
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": False},
    "eos_token": {"__type": "AddedToken", "content": "</s>"}, "pad_token": None, "add_bos_token": True,
    "chat_template": [{"name": "default", "template": "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"},
                      {"name": "tool_use", "template": "{{ tools | tojson }}"}]}, indent=1))

# --- chat templates: the jinja2 subset cases, the built-ins and real templates ----------------------------------
with tempfile.TemporaryDirectory() as tmp:
    prog = os.path.join(tmp, 'subset.cpp')
    with open(prog, 'w') as f:
        f.write('#include <fstream>\n#include <string>\nstruct S { const char* name; const char* tmpl; const char* v; '
                'const char* e; bool err; };\nconst S k[] = {\n#include "chat_template_cases.inc"\n};\n'
                'int main(int, char** argv) { for (const auto& c : k) std::ofstream(std::string(argv[1]) + '
                '"/subset_" + c.name + ".jinja", std::ios::binary) << c.tmpl; }\n')
    exe = os.path.join(tmp, 'subset')
    subprocess.check_call([os.environ.get('CXX', 'c++'), '-std=c++20', '-I', os.path.join(ROOT, 'tests'), prog, '-o', exe])
    os.makedirs(os.path.join(C, 'chat_template'), exist_ok=True)
    subprocess.check_call([exe, os.path.join(C, 'chat_template')])
for name in ('chatml', 'alpaca', 'llama3'):
    with open(os.path.join(ROOT, 'resources/chat_templates', name + '.jinja'), 'rb') as f:
        out('chat_template', 'builtin_' + name + '.jinja', f.read())
out('chat_template', 'real_qwen3.jinja', asset_json('tokenizer-qwen3/tokenizer_config.json')['chat_template'])
out('chat_template', 'real_llama3.jinja', asset_json('tokenizer-llama3/tokenizer_config.json')['chat_template'])

# --- datasets: the first byte picks extension (bits 0-2), text split (3-4) and format (5-7), see fuzz_dataset.cpp
EXT = {'.json': 0, '.jsonl': 1, '.txt': 2, '.csv': 3, '.tsv': 4}


def ds(name, ext, body, split=0, fmt=0):
    out('dataset', name, bytes([EXT[ext] | (split << 3) | (fmt << 5)]) + (body.encode() if isinstance(body, str) else body))


def records(rel, n):
    return asset_json('datasets/' + rel)[:n]


ds('alpaca.json', '.json', json.dumps([{k: (v[:300] if isinstance(v, str) else v) for k, v in r.items()}
                                        for r in records('llamafactory_alpaca_en_demo.json', 3)], indent=1))
ds('identity_alpaca.json', '.json', json.dumps(records('llamafactory_identity.json', 3), indent=1))
ds('sharegpt.json', '.json', json.dumps(records('fastchat_dummy_conversation.json', 2), indent=1))
ds('sharegpt_tools.json', '.json', json.dumps(records('llamafactory_glaive_toolcall_en_demo.json', 1), ensure_ascii=False))
with open(os.path.join(ASSETS, 'datasets/mt_bench_question.jsonl'), encoding='utf-8') as f:
    ds('mt_bench_lines.jsonl', '.jsonl', ''.join(f.readline() for _ in range(3)))
ds('chat.jsonl', '.jsonl',
   '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}\n'
   '{"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": {"city": "Paris"}}}]}, {"role": "tool", "content": "21"}, {"role": "assistant", "content": "21 C"}], "tools": [{"type": "function", "function": {"name": "w"}}]}\n')
ds('prompt_completion.jsonl', '.jsonl', '{"prompt": "2+2=", "completion": "4"}\n{"prompt": "3+3=", "completion": "6"}')
ds('text_records.jsonl', '.jsonl', '\xef\xbb\xbf{"text": "one"}\r\n{"text": "two"}\r\n'.encode('latin-1'))
with open(os.path.join(ASSETS, 'datasets/tinyshakespeare_input.txt'), encoding='utf-8') as f:
    ds('shakespeare.txt', '.txt', f.read(1500))
with open(os.path.join(ASSETS, 'datasets/tinystories_train_head.txt'), encoding='utf-8') as f:
    ds('tinystories_lines.txt', '.txt', f.read(1200), split=1)
ds('alpaca.csv', '.csv', 'instruction,input,output,system\n"Say ""hi""",,"Hi,\nthere",\nAdd,1 2,3,Be exact\n')
ds('messages.csv', '.csv', 'messages\n"[{""role"": ""user"", ""content"": ""a""}, {""role"": ""assistant"", ""content"": ""b""}]"\n')
ds('text.tsv', '.tsv', 'text\tid\r\nfirst document\t1\r\n"quoted\tdoc"\t2\r\n')
ds('prompt_completion.tsv', '.tsv', ' Prompt \tCOMPLETION\nq\ta\n', fmt=4)

# --- adapter_config.json ---------------------------------------------------------------------------------------
for v in ('bf16', 'layers', 'regex', 'regex_layer'):
    with open(os.path.join(ROOT, 'tests/fixtures/peft', v, 'adapter_config.json'), 'rb') as f:
        out('peft_config', v + '.json', f.read())
base = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 8, "lora_alpha": 16, "lora_dropout": 0.05, "bias": "none"}
out('peft_config', 'all_linear.json', json.dumps(dict(base, target_modules="all-linear")))
out('peft_config', 'fused_phi3.json', json.dumps(dict(base, target_modules=["qkv_proj", "gate_up_proj", "o_proj"], layers_to_transform=1)))
out('peft_config', 'list_layers_pattern.json', json.dumps(dict(base, target_modules=["q_proj", "v_proj"], layers_to_transform=[0, 2], layers_pattern="layers", use_rslora=True)))
out('peft_config', 'dora_refused.json', json.dumps(dict(base, target_modules=["q_proj"], use_dora=True, rank_pattern={"q_proj": 4})))

# adapter_model.safetensors of the PEFT fixtures, behind the byte that picks their config (fuzz_peft_adapter.cpp)
for i, v in enumerate(('bf16', 'layers', 'regex', 'regex_layer')):
    with open(os.path.join(ROOT, 'tests/fixtures/peft', v, 'adapter_model.safetensors'), 'rb') as f:
        out('peft_adapter', v + '.bin', bytes([i]) + f.read())

# --- run config ------------------------------------------------------------------------------------------------
for p in ('quick_test', 'balanced', 'max_quality'):
    with open(os.path.join(ROOT, 'resources/presets', p + '.json'), 'rb') as f:
        out('run_config', 'preset_' + p + '.json', f.read())
out('run_config', 'full.json', json.dumps({
    "schema_version": 1, "model": "models/llama", "init_adapter": "", "output_dir": "runs/a", "seed": 7, "device": "cpu",
    "data": {"dataset": "d.jsonl", "validation": "", "validation_fraction": 0.1, "format": "auto", "max_seq_len": 256,
             "packing": False, "template": "chatml", "train_on_all_tokens": True},
    "lora": {"r": 4, "alpha": 8, "dropout": 0.1, "use_rslora": True, "target_modules": ["q_proj", "v_proj"]},
    "training": {"lr": 1e-4, "schedule": "cosine", "warmup_steps": 0, "warmup_ratio": 0.1, "epochs": 2, "max_steps": 0,
                 "batch_tokens": 512, "grad_accum": 2, "max_grad_norm": 1.0, "weight_decay": 0.01, "betas": [0.9, 0.999],
                 "eps": 1e-8, "eval_every": 10, "checkpoint_every": 50, "checkpoint_minutes": 5, "keep_checkpoints": 2,
                 "max_nonfinite_steps": 3},
    "memory": {"checkpointing": "selective"}}, indent=1))
with open(os.path.join(C, 'run_config', 'full.json')) as f:  # the memory keys: budgets and the attention kernels
    budgets = json.load(f)
budgets['memory'] = {"checkpointing": "smart", "vram_budget_gib": 24, "host_budget_gib": 100, "attention": "inhouse"}
out('run_config', 'memory_budgets.json', json.dumps(budgets, indent=1))
print('fuzz/make_corpus.py: corpora written to', C)
