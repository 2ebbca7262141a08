# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
import inspect, sys
import transformers.models.gemma2.modeling_gemma2 as g2
import transformers.models.gemma3.modeling_gemma3 as g3
import transformers.models.gemma3.configuration_gemma3 as c3
import transformers.models.gemma2.configuration_gemma2 as c2
from transformers import modeling_rope_utils as ru
out = open(sys.argv[1], "w")
for mod, names in ((g2, ["Gemma2RMSNorm", "Gemma2MLP", "Gemma2RotaryEmbedding", "Gemma2Attention", "eager_attention_forward", "Gemma2DecoderLayer", "Gemma2Model", "Gemma2ForCausalLM"]),
                   (g3, ["Gemma3TextScaledWordEmbedding", "Gemma3RMSNorm", "Gemma3RotaryEmbedding", "Gemma3Attention", "Gemma3DecoderLayer", "Gemma3TextModel", "Gemma3ForCausalLM"]),
                   (c3, ["Gemma3TextConfig"]), (c2, ["Gemma2Config"]), (ru, ["_compute_linear_scaling_rope_parameters", "_compute_default_rope_parameters"])):
    for n in names:
        try:
            out.write(f"##### {mod.__name__}.{n}\n" + inspect.getsource(getattr(mod, n)) + "\n")
        except Exception as e:
            out.write(f"##### {n}: {e!r}\n")
