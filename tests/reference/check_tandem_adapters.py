# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""PEFT-side check that PEFT 0.21 loads adapters written by Tandem's writer (run once on the device machine,
torch 2.11 / transformers 5.17 / peft 0.21.0, from the repo root; output recorded in the commit message).
C holds the adapter_config.json files our write_peft_adapter wrote ("same": the tensors of the PEFT fixture
adapter rewritten; "custom": r 3, alpha 5.5, dropout 0.1, targets v_proj/down_proj/q_proj, layer 1 only,
rsLoRA for qwen3). For "same" the fixture's adapter_model.safetensors is used (ours is byte-identical, see
test_peft_adapter); for "custom" the tensors are rebuilt with the test's formula, saved with the reference
safetensors library, and the sha256 printed to compare with the file our writer wrote.
Checks: no warnings on load; "same" gives the logits of PEFT's own adapter; "custom" puts LoRA exactly on the
configured modules with r, scaling and dropout as configured.
"""
import json,os,shutil,math,hashlib,torch,warnings
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM as M
from peft import PeftModel
C=json.loads('{"llama/same":{"alpha_pattern":{},"base_model_name_or_path":null,"bias":"none","fan_in_fan_out":false,"inference_mode":true,"init_lora_weights":true,"layers_pattern":null,"layers_to_transform":null,"lora_alpha":8,"lora_dropout":0.0,"modules_to_save":null,"peft_type":"LORA","r":4,"rank_pattern":{},"revision":null,"target_modules":["o_proj","k_proj","down_proj","v_proj","gate_proj","up_proj","q_proj"],"task_type":"CAUSAL_LM","use_dora":false,"use_rslora":false},"llama/custom":{"alpha_pattern":{},"base_model_name_or_path":"tiny/llama","bias":"none","fan_in_fan_out":false,"inference_mode":true,"init_lora_weights":true,"layers_pattern":null,"layers_to_transform":[1],"lora_alpha":5.5,"lora_dropout":0.1,"modules_to_save":null,"peft_type":"LORA","r":3,"rank_pattern":{},"revision":null,"target_modules":["v_proj","down_proj","q_proj"],"task_type":"CAUSAL_LM","use_dora":false,"use_rslora":false},"qwen3/custom":{"alpha_pattern":{},"base_model_name_or_path":"tiny/qwen3","bias":"none","fan_in_fan_out":false,"inference_mode":true,"init_lora_weights":true,"layers_pattern":null,"layers_to_transform":[1],"lora_alpha":5.5,"lora_dropout":0.1,"modules_to_save":null,"peft_type":"LORA","r":3,"rank_pattern":{},"revision":null,"target_modules":["v_proj","down_proj","q_proj"],"task_type":"CAUSAL_LM","use_dora":false,"use_rslora":true},"qwen3/same":{"alpha_pattern":{},"base_model_name_or_path":null,"bias":"none","fan_in_fan_out":false,"inference_mode":true,"init_lora_weights":true,"layers_pattern":null,"layers_to_transform":null,"lora_alpha":8,"lora_dropout":0.0,"modules_to_save":null,"peft_type":"LORA","r":4,"rank_pattern":{},"revision":null,"target_modules":["o_proj","k_proj","down_proj","v_proj","gate_proj","up_proj","q_proj"],"task_type":"CAUSAL_LM","use_dora":false,"use_rslora":true}}')
R="tests/fixtures/models"
def ld(v,d):
 m=M.from_pretrained(R+"/"+v,dtype=torch.float32)
 with warnings.catch_warnings(record=True) as w:
  warnings.simplefilter("always");p=PeftModel.from_pretrained(m,d)
 return p.eval(),[str(x.message)[:200] for x in w]
for key,c in C.items():
 v,k=key.split("/");d="/tmp/a/"+key;os.makedirs(d)
 open(d+"/adapter_config.json","w").write(json.dumps(c))
 if k=="same":shutil.copy(R+"/"+v+"/adapter/adapter_model.safetensors",d)
 else:
  b=M.from_pretrained(R+"/"+v).state_dict();T={};j=0
  for l in c["layers_to_transform"]:
   for t in c["target_modules"]:
    n="model.layers.%d.%s.%s"%(l,"self_attn" if t[0] in "qkvo" else "mlp",t);o,i=b[n+".weight"].shape;r=c["r"]
    for s,sh in (("A",(r,i)),("B",(o,r))):
     T["base_model.model."+n+".lora_"+s+".weight"]=torch.tensor([math.sin(0.37*x+1.3*j)*0.1 for x in range(sh[0]*sh[1])],dtype=torch.float32).reshape(sh);j+=1
  save_file(T,d+"/adapter_model.safetensors",metadata={"format":"pt"})
  print(key,"sha",hashlib.sha256(open(d+"/adapter_model.safetensors","rb").read()).hexdigest())
 p,w=ld(v,d);print(key,"warnings",w)
 if k=="same":
  ids=torch.tensor([json.load(open(R+"/"+v+"/sequences.json"))["sequences"][0]]);q,_=ld(v,R+"/"+v+"/adapter")
  with torch.no_grad():print(key,"logit diff",(p(ids).logits-q(ids).logits).abs().max().item())
 else:
  for n,x in p.named_modules():
   if hasattr(x,"lora_A") and "default" in x.lora_A:print(key,n.split("layers.")[1],"r",x.r["default"],"scale",x.scaling["default"],"drop",x.lora_dropout["default"].p)
