# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Made tests/fixtures/peft/<form>/: PEFT 0.21 adapters for the qwen3 fixture model in the less common forms
the reader must accept (target_modules as a regex string, a regex picking one layer, layers_to_transform,
a bf16 file). Ran on the device machine (torch 2.11, transformers 5.17, peft 0.21.0) from the repo root:
  python3 tests/reference/make_peft_form_fixtures.py tests/fixtures/peft
"""
import os,sys,torch
from transformers import AutoModelForCausalLM as M
from peft import LoraConfig,get_peft_model
out=sys.argv[1]
forms={"regex":dict(target_modules=r".*\.(q_proj|v_proj)"),
"regex_layer":dict(target_modules=r"model\.layers\.1\.mlp\.(up|down)_proj"),
"layers":dict(target_modules=["k_proj","o_proj"],layers_to_transform=[0]),
"bf16":dict(target_modules=["q_proj","gate_proj"])}
for tag,kw in forms.items():
 torch.manual_seed(7)
 m=M.from_pretrained("tests/fixtures/models/qwen3",dtype=torch.float32)
 pm=get_peft_model(m,LoraConfig(r=2,lora_alpha=4,task_type="CAUSAL_LM",init_lora_weights=False,**kw))
 if tag=="bf16":pm=pm.to(torch.bfloat16)
 pm.save_pretrained(out+"/"+tag)
 os.remove(out+"/"+tag+"/README.md")
 print(tag,sorted(os.listdir(out+"/"+tag)))
