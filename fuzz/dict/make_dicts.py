#!/usr/bin/env python3
"""Writes the libFuzzer dictionaries fuzz/dict/<target>.dict (JSON syntax + the keys each parser reads;
Jinja syntax for the templates). Run from anywhere: python3 fuzz/dict/make_dicts.py"""
import os
os.chdir(os.path.dirname(os.path.abspath(__file__)))
import sys
syntax = ['{','}','[',']',':',',','"','\\"','\\\\','\\n','\\u0000','\\ud800','\\u00e9','true','false','null','-1','0','1e309','-0.0','1.5','18446744073709551615','9223372036854775807','-9223372036854775808','""','{}','[]']
def esc(s):
    b = s.encode('latin-1') if all(ord(c) < 256 for c in s) else s.encode('utf-8')
    out = ''
    for c in b:
        if c == 0x5c: out += '\\\\'
        elif c == 0x22: out += '\\"'
        elif 0x20 <= c < 0x7f: out += chr(c)
        else: out += '\\x%02X' % c
    return '"' + out + '"'
def write(name, comment, keys, extra=(), json_syntax=True):
    with open(name+'.dict','w') as f:
        f.write('# libFuzzer dictionary for fuzz_%s: %s\n' % (name, comment))
        if json_syntax:
            f.write('# JSON syntax\n')
            for s in syntax: f.write(esc(s)+'\n')
        if keys:
            f.write('# keys and values the parser looks for\n')
            for k in keys: f.write(esc('"%s"' % k)+'\n')
        for e in extra: f.write(esc(e)+'\n')


write('model_config', 'config.json keys (engine/io/model_config.cpp, engine/arch/*.cpp)',
      ['architectures', 'model_type', 'hidden_size', 'intermediate_size', 'num_hidden_layers', 'num_attention_heads',
       'num_key_value_heads', 'head_dim', 'vocab_size', 'max_position_embeddings', 'rms_norm_eps', 'rope_theta',
       'rope_scaling', 'rope_parameters', 'rope_type', 'type', 'factor', 'low_freq_factor', 'high_freq_factor',
       'original_max_position_embeddings', 'short_factor', 'long_factor', 'attention_factor', 'beta_fast', 'beta_slow',
       'tie_word_embeddings', 'attention_bias', 'mlp_bias', 'hidden_act', 'sliding_window', 'use_sliding_window',
       'max_window_layers', 'bos_token_id', 'eos_token_id', 'torch_dtype', 'dtype', 'num_experts', 'num_local_experts',
       'num_experts_per_tok', 'experts_per_token', 'moe_intermediate_size', 'decoder_sparse_step', 'mlp_only_layers',
       'layer_types', 'quantization_config', 'quant_method', 'partial_rotary_factor', 'pad_token_id',
       'LlamaForCausalLM', 'MistralForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM', 'Phi3ForCausalLM',
       'Qwen3MoeForCausalLM', 'MixtralForCausalLM', 'GptOssForCausalLM', 'llama', 'mistral', 'qwen2', 'qwen3', 'phi3',
       'qwen3_moe', 'mixtral', 'gpt_oss', 'default', 'linear', 'llama3', 'longrope', 'su', 'yarn', 'dynamic', 'silu',
       'swish', 'gelu', 'sliding_attention', 'full_attention', 'bfloat16'])
write('safetensors', 'the safetensors header (engine/io/safetensors.cpp)',
      ['__metadata__', 'dtype', 'shape', 'data_offsets', 'format', 'pt', 'BOOL', 'U8', 'I8', 'F8_E5M2', 'F8_E4M3', 'I16',
       'U16', 'F16', 'BF16', 'I32', 'U32', 'F32', 'F64', 'I64', 'U64'],
      extra=['\x08\x00\x00\x00\x00\x00\x00\x00', '\x00\x00\x00\x00\x00\x00\x00\x00', '\xff\xff\xff\xff\xff\xff\xff\xff',
             '        '])
write('tokenizer', 'tokenizer.json (engine/tokenizer/*.cpp)',
      ['version', 'model', 'type', 'BPE', 'WordPiece', 'Unigram', 'vocab', 'merges', 'unk_token', 'byte_fallback',
       'fuse_unk', 'ignore_merges', 'dropout', 'continuing_subword_prefix', 'end_of_word_suffix', 'added_tokens', 'id',
       'content', 'single_word', 'lstrip', 'rstrip', 'normalized', 'special', 'normalizer', 'normalizers',
       'pre_tokenizer', 'pretokenizers', 'post_processor', 'processors', 'decoder', 'decoders', 'Sequence', 'NFC',
       'NFD', 'NFKC', 'NFKD', 'Lowercase', 'Strip', 'StripAccents', 'Replace', 'Prepend', 'prepend', 'pattern', 'Regex',
       'String', 'Split', 'behavior', 'Isolated', 'Removed', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous',
       'invert', 'ByteLevel', 'add_prefix_space', 'trim_offsets', 'use_regex', 'Metaspace', 'replacement',
       'prepend_scheme', 'always', 'first', 'never', 'split', 'Whitespace', 'WhitespaceSplit', 'Punctuation', 'Digits',
       'individual_digits', 'TemplateProcessing', 'single', 'pair', 'SpecialToken', 'type_id', 'special_tokens', 'ids',
       'tokens', 'A', 'B', 'ByteFallback', 'Fuse', 'start', 'stop', 'BertProcessing', 'RobertaProcessing'],
      extra=['\u2581', '\u0120', '\u010a', '<0x0A>', '<s>', '</s>', '<unk>', '<|endoftext|>', '(?i:', '\\\\p{L}',
             '\\\\s+(?!\\\\S)', '[^\\\\r\\\\n]'])
write('tokenizer_config', 'tokenizer_config.json (engine/tokenizer/tokenizer_config.cpp) and its chat template',
      ['bos_token', 'eos_token', 'pad_token', 'unk_token', 'chat_template', 'add_bos_token', 'add_eos_token',
       'tokenizer_class', '__type', 'AddedToken', 'content', 'name', 'template', 'default', 'tool_use'],
      extra=['{{', '}}', '{%', '%}', '{% for message in messages %}', '{% endfor %}', '{% if', '{% endif %}',
             'message[\'content\']', 'raise_exception(', 'add_generation_prompt'])
write('chat_template', 'the Jinja subset of chat templates (engine/tokenizer/jinja_*.cpp)', [], json_syntax=False, extra=[
    '{{', '}}', '{%', '%}', '{#', '#}', '{{-', '-}}', '{%-', '-%}', '{%+', '+%}', '{% raw %}', '{% endraw %}',
    '{% if ', '{% elif ', '{% else %}', '{% endif %}', '{% for ', ' in ', '{% endfor %}', '{% set ', '{% endset %}',
    '{% macro ', '{% endmacro %}', '{% call', '{% filter ', '{% endfilter %}', '{% with ', '{% endwith %}',
    '{% break %}', '{% continue %}', '{% generation %}', '{% endgeneration %}', ' recursive', 'loop.index',
    'loop.index0', 'loop.first', 'loop.last', 'loop.length', 'loop.previtem', 'loop.nextitem', 'loop.cycle(',
    'namespace(', 'ns.', 'range(', 'dict(', 'raise_exception(', 'strftime_now(', 'messages', 'message', 'tools',
    'documents', 'add_generation_prompt', 'bos_token', 'eos_token', 'enable_thinking', 'role', 'content',
    'tool_calls', 'function', 'arguments', 'name', '|length', '|tojson', '|trim', '|upper', '|lower', '|title',
    '|capitalize', '|join(', '|replace(', '|default(', '|first', '|last', '|list', '|items', '|map(', '|select(',
    '|reject(', '|selectattr(', '|rejectattr(', '|string', '|int', '|float', '|abs', '|round', '|sort', '|unique',
    '|reverse', '|indent(', '|safe', '|e', '|batch(', '|slice(', '|sum', '|min', '|max', '|wordcount', '|center(',
    '|dictsort', '|count', '|striptags', '|format(', ' is defined', ' is not none', ' is string', ' is mapping',
    ' is iterable', ' is sequence', ' is number', ' is none', ' is true', ' is false', ' is odd', ' is even',
    ' is divisibleby(', ' is in(', ' is equalto(', ' is eq ', ' not ', ' and ', ' or ', ' if ', ' else ', '~', '**',
    '//', '%', '==', '!=', '<=', '>=', '[::-1]', '[1:]', '.startswith(', '.endswith(', '.split(', '.strip(',
    '.lstrip(', '.rstrip(', '.items()', '.keys()', '.values()', '.get(', '.append(', '.upper()', '.lower()',
    '.replace(', '.format(', '.title()', '.count(', '.find(', '.index(', '.join(', 'true', 'false', 'none', 'True',
    'False', 'None', '"\\n"', "'\\''", '1e309', '-0', '9223372036854775807', '(1, 2)', '[1, [2]]', '{"a": 1}'])
write('dataset', 'dataset files (engine/data/reader.cpp): JSON keys, roles, CSV syntax',
      ['instruction', 'input', 'output', 'system', 'history', 'messages', 'conversations', 'from', 'value', 'role',
       'content', 'prompt', 'completion', 'text', 'tools', 'tool_calls', 'function_call', 'observation', 'human', 'gpt',
       'user', 'assistant', 'tool', 'function', 'name', 'arguments'],
      extra=['\r\n', '\n\n', '""', '","', '\t', '\xef\xbb\xbf', 'instruction,output', 'text\t', 'messages\n'])
write('peft_config', 'adapter_config.json (parse_peft_adapter_config, engine/export/peft_adapter.cpp)',
      ['peft_type', 'LORA', 'task_type', 'CAUSAL_LM', 'r', 'lora_alpha', 'lora_dropout', 'use_rslora', 'use_dora',
       'bias', 'none', 'lora_bias', 'fan_in_fan_out', 'rank_pattern', 'alpha_pattern', 'modules_to_save',
       'trainable_token_indices', 'layer_replication', 'target_parameters', 'exclude_modules', 'use_qalora',
       'alora_invocation_tokens', 'use_bdlora', 'arrow_config', 'kasa_config', 'monteclora_config', 'velora_config',
       'init_lora_weights', 'pissa', 'olora', 'base_model_name_or_path', 'layers_to_transform', 'layers_pattern',
       'layers', 'target_modules', 'all-linear', 'q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj',
       'down_proj', 'qkv_proj', 'gate_up_proj', 'self_attn', 'mlp', 'lm_head', 'model.layers.'],
      extra=['.*', '\\\\.', '(q_proj|v_proj)', '[0-9]+', '.*\\\\.(q_proj|v_proj)', '^', '$', '(?:', '{2,}', '\\\\d'])
write('run_config', 'run.json (parse_run_config, engine/train/run_config.cpp; lora from_json)',
      ['schema_version', 'model', 'init_adapter', 'data', 'lora', 'training', 'memory', 'device', 'seed', 'output_dir',
       'dataset', 'validation', 'validation_fraction', 'format', 'max_seq_len', 'packing', 'template',
       'train_on_all_tokens', 'r', 'alpha', 'dropout', 'use_rslora', 'target_modules', 'layers_to_transform', 'lr',
       'schedule', 'warmup_steps', 'warmup_ratio', 'epochs', 'max_steps', 'batch_tokens', 'grad_accum',
       'max_grad_norm', 'weight_decay', 'betas', 'eps', 'eval_every', 'checkpoint_every', 'checkpoint_minutes',
       'keep_checkpoints', 'max_nonfinite_steps', 'checkpointing', 'cpu', 'cuda', 'auto', 'constant', 'linear',
       'cosine', 'off', 'recompute', 'selective', 'smart', 'smart-single', 'chatml', 'alpaca', 'llama3', 'q_proj',
       'v_proj', 'quantization', 'nf4', 'precision', 'bf16', 'fp8', 'vram_budget_gib', 'host_budget_gib', 'attention', 'inhouse'])
write('safetensors_index', 'model.safetensors.index.json (SafetensorsSet::open_index)',
      ['metadata', 'total_size', 'weight_map', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors',
       'model.safetensors.index.json', 'model.embed_tokens.weight', 'model.norm.weight', 'lm_head.weight', '.', '..',
       '/', 'model.safetensors'])
write('peft_adapter', 'adapter_model.safetensors of a PEFT adapter (read_peft_adapter)',
      ['__metadata__', 'dtype', 'shape', 'data_offsets', 'format', 'pt', 'F32', 'F16', 'BF16', 'I8',
       'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight',
       'base_model.model.model.layers.1.mlp.down_proj.lora_B.weight', 'base_model.model.', 'model.layers.',
       '.self_attn.', '.mlp.', 'q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj',
       '.lora_A.weight', '.lora_B.weight', '.lora_A.default.weight', 'lora_embedding_A', '.bias'])
