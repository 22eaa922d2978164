#!/usr/bin/env python3
"""`mmc data --sft` against an independent implementation of MiniMind's SFTDataset
(dataset/lm_dataset.py), with ids from Hugging Face tokenizers and templates run by jinja2.
usage: sft_reference.py MMC TOKENIZER.json WORKDIR

What a row is (see tokenizer/sft_data.c and README, `mmc data --sft`):
  roles:    positional (entry i is user when i is even, assistant when odd, whatever "role"
            says) or, with --roles as-written, the "role" fields;
  text:     ChatML as mmc's template or MiniMind2's renders it (add_generation_prompt
            false), built here by plain string code and checked against jinja2 running the
            template texts with Hugging Face's settings (trim_blocks, lstrip_blocks);
  ids:      tokenizers' encode of the text (special tokens matched in it, nothing added);
  rows:     ids[:seq+1] padded with <|endoftext|> to seq+1, the mask MiniMind's
            _generate_loss_mask on the padded row; --pack: each conversation whole with its
            own mask, back to back, cut into rows, the last padded with mask 0;
  --val:    a conversation goes to name.val.bin when mmc's hash of its line's bytes is
            below the fraction (the hash is reimplemented here);
  files:    token format version 2: 128-byte header, u16 ids, the mask plane one bit a token
            at the next multiple of 8 after them.
Also: bad lines reported with their numbers and skipped, --strict stopping at the first and
leaving no file, identical bytes for 1, 2 and 3 threads, the template check (mmc's and
MiniMind2's accepted, also reformatted; MiniMind's newest with tools and <think> refused,
naming both), `mmc tokens` on a masked file, and a version 1 file still read."""
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys

from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

mmc, tok_path, work = sys.argv[1:4]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
tok = Tokenizer.from_file(tok_path)
PAD = tok.token_to_id("<|endoftext|>")
BOS_IDS = tok.encode("<|im_start|>assistant", add_special_tokens=False).ids  # MiniMind's self.bos_id
EOS_IDS = tok.encode("<|im_end|>", add_special_tokens=False).ids  # self.eos_id
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print(f"FAIL {what}")
    return ok


# ---- the templates

def c_string(source, name):
    """the value of `const char NAME[] = "..." "...";` in a C file"""
    m = re.search(r"const char " + name + r"\[\] =\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+);", source)
    pieces = re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m.group(1))
    return re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), "".join(pieces))


with open(os.path.join(ROOT, "tokenizer", "chat_template.c"), encoding="utf-8") as f:
    MMC_TEMPLATE = c_string(f.read(), "chat_template_mmc")  # what mmc export writes

# MiniMind2's tokenizer_config.json chat_template (the \n are backslash-n inside Jinja strings)
MINIMIND2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set system_message = messages[0]['content'] %}"
    "{{ '<|im_start|>system\\n' + system_message + '<|im_end|>\\n' }}{% else %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant<|im_end|>\\n' }}{% endif %}"
    "{% for message in messages %}{% set content = message['content'] %}{% if message['role'] == 'user' %}"
    "{{ '<|im_start|>user\\n' + content + '<|im_end|>\\n<|im_start|>assistant\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ content + '<|im_end|>' + '\\n' }}{% endif %}{% endfor %}")

# the same template laid out on lines, with trim markers and spaces in the tags: Jinja
# renders it identically (checked below), and mmc must accept it
MINIMIND2_REFORMATTED = (MINIMIND2_TEMPLATE.replace("%}{%", "%}\n    {%").replace("}}{%", "}}\n{%-")
                         .replace("{% if", "{%   if").replace("{{ '", "{{- '"))

# MiniMind's newest tokenizer_config.json chat_template (tools, <think>): refused
NEWEST_MINIMIND_TEMPLATE = r'''{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if true %}
            {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if open_thinking is defined and open_thinking is true %}
        {{- '<think>\n' }}
    {%- else %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}'''

jinja = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)  # Hugging Face's settings
compiled = {k: jinja.from_string(t) for k, t in
            (("mmc", MMC_TEMPLATE), ("minimind2", MINIMIND2_TEMPLATE), ("reformatted", MINIMIND2_REFORMATTED))}
DEFAULT_SYSTEM = "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"


def render(style, messages):
    """the template's text, by plain string building"""
    out, rest = [], messages
    if messages and messages[0]["role"] == "system":
        out.append("<|im_start|>system\n" + messages[0]["content"] + "<|im_end|>\n")
        rest = messages[1:]
    else:
        out.append(DEFAULT_SYSTEM)
    for m in rest:
        if style == "mmc":
            out.append("<|im_start|>" + m["role"] + "\n" + m["content"] + "<|im_end|>\n")
        elif m["role"] == "user":
            out.append("<|im_start|>user\n" + m["content"] + "<|im_end|>\n<|im_start|>assistant\n")
        elif m["role"] == "assistant":
            out.append(m["content"] + "<|im_end|>\n")
    return "".join(out)


def messages_of(conv, roles):
    if roles == "positional":  # MiniMind's _create_chat_prompt
        return [{"role": "user" if i % 2 == 0 else "assistant", "content": t["content"]} for i, t in enumerate(conv)]
    return [{"role": t["role"], "content": t["content"]} for t in conv]


# ---- MiniMind's mask, rows and files

def loss_mask(ids, max_length):
    """SFTDataset._generate_loss_mask"""
    mask = [0] * len(ids)
    i = 0
    while i < len(ids):
        if ids[i:i + len(BOS_IDS)] == BOS_IDS:
            start = i + len(BOS_IDS)
            end = start
            while end < len(ids):
                if ids[end:end + len(EOS_IDS)] == EOS_IDS:
                    break
                end += 1
            for j in range(start + 1, min(end + len(EOS_IDS) + 1, max_length)):
                mask[j] = 1
            i = end + len(EOS_IDS) if end < len(ids) else len(ids)
        else:
            i += 1
    return mask


M64 = (1 << 64) - 1


def mix(h):
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & M64
    return h ^ (h >> 33)


def bytes_hash(b):  # tokenizer/bytemap.c
    n = len(b)
    h = 0x9E3779B97F4A7C15 ^ ((n * 0x100000001B3) & M64)
    i = 0
    while n - i >= 8:
        h = ((h ^ int.from_bytes(b[i:i + 8], "little")) * 0x87C37B91114253D5) & M64
        h = ((h << 31) | (h >> 33)) & M64
        i += 8
    h = mix(h ^ int.from_bytes(b[i:], "little"))
    return h or 1


def goes_to_val(val, line_bytes):  # data_goes_to_val in tokenizer/data_cli.c
    h = (bytes_hash(line_bytes) * 0xD6E8FEB86659FD93) & M64
    return val > 0 and (h >> 11) / 9007199254740992.0 < val


def expected(convs, roles, style, seq, pack, val):
    """{"train": (ids, mask), "val": ...} as MiniMind would make them; convs: (line bytes, conv)"""
    texts = []
    for _, conv in convs:
        msgs = messages_of(conv, roles)
        text = render(style, msgs)
        check(compiled[style].render(messages=msgs, add_generation_prompt=False) == text,
              f"jinja2 renders {style}'s template as the plain code does: {msgs}")
        if style == "minimind2":
            check(compiled["reformatted"].render(messages=msgs, add_generation_prompt=False) == text,
                  "the reformatted MiniMind2 template renders the same")
        texts.append(text)
    encodings = tok.encode_batch(texts)
    out = {"train": ([], []), "val": ([], [])}
    L = seq + 1
    for (line, _), e in zip(convs, encodings):
        ids, mask = out["val" if goes_to_val(val, line) else "train"]
        if pack:
            ids += e.ids
            mask += loss_mask(e.ids, len(e.ids))
        else:
            row = e.ids[:L] + [PAD] * (L - len(e.ids[:L]))
            ids += row
            mask += loss_mask(row, L)
    if pack:
        for ids, mask in out.values():
            pad = -len(ids) % L
            ids += [PAD] * pad
            mask += [0] * pad
    return out


def read_tokens(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, vocab, count, row, pad = struct.unpack_from("<8sIIQII", data)
    assert magic == b"mmctoken", path
    if version == 1:
        assert len(data) == 64 + 2 * count, path
        return {"version": 1, "row": row, "pad": pad, "ids": list(struct.unpack_from(f"<{count}H", data, 64)), "mask": None}
    flags, reserved, at = struct.unpack_from("<IIQ", data, 64)
    check(version == 2 and flags == 1 and reserved == 0 and data[80:128] == bytes(48), f"{path}: a version 2 header with a mask")
    ids_end = 128 + 2 * count
    check(at == (ids_end + 7) // 8 * 8 and len(data) == at + (count + 7) // 8, f"{path}: the mask plane after the ids")
    check(data[ids_end:at] == bytes(at - ids_end), f"{path}: zero bytes before the mask plane")
    ids = list(struct.unpack_from(f"<{count}H", data, 128))
    mask = [(data[at + i // 8] >> (i % 8)) & 1 for i in range(count)]
    return {"version": 2, "row": row, "pad": pad, "ids": ids, "mask": mask}


def run(*args, ok=True, cmd="data"):
    p = subprocess.run([mmc, cmd, *args], capture_output=True, text=True)
    if ok and p.returncode != 0:
        print(p.stdout, p.stderr)
        sys.exit(f"FAIL mmc {cmd} {' '.join(args)} exited {p.returncode}")
    return p


def compare(label, path, want, seq):
    """every row's ids and mask bits, in train.bin and train.val.bin"""
    for side, name in (("train", path), ("val", path[:-4] + ".val.bin")):
        ids, mask = want[side]
        if not os.path.exists(name):
            check(not ids, f"{label}: {name} written")
            continue
        got = read_tokens(name)
        check(got["row"] == seq + 1 and got["pad"] == PAD, f"{label}: {side} header")
        L = seq + 1
        if not check(len(got["ids"]) == len(ids), f"{label}: {side}: {len(got['ids']) // L} rows, want {len(ids) // L}"):
            continue
        for r in range(len(ids) // L):
            a, b = slice(r * L, (r + 1) * L), f"{label}: {side} row {r}"
            if not check(got["ids"][a] == ids[a], f"{b}: ids {got['ids'][a]} != {ids[a]}"):
                break
            if not check(got["mask"][a] == mask[a], f"{b}: mask {got['mask'][a]} != {mask[a]}\n  ids {ids[a]}"):
                break


# ---- the corpus: hand-made conversations, random ones, bad lines

with open(os.path.join(ROOT, "tokenizer", "default", "corpus.jsonl"), encoding="utf-8") as f:
    poems = [json.loads(line)["text"] for line in f]
english = ["Hello, how are you today?", "The quick brown fox jumps over the lazy dog.", "What is 12 + 30? It is 42.",
           "Please summarise the poem in one sentence.", "Sure! Here it is:\n\n- first\n- second", "  leading spaces",
           "trailing newline\n", "emoji 😀 and 中文 mixed", "tabs\tand\r\nCRLF inside"]


def turn(role, content, **extra):
    return {"role": role, "content": content, **extra}


long_reply = "\n".join(poems[:12])  # far past --seq: cut in the middle of the reply
hand = [
    [turn("user", "你好"), turn("assistant", "你好！我是一个乐于助人的助手。")],
    [turn("system", "You are a poet."), turn("user", "Write a line about the moon."),
     turn("assistant", "The moon hangs low over silver water.")],
    [turn("user", "床前明月光的下一句是什么？"), turn("assistant", "疑是地上霜。"), turn("user", "作者是谁？"),
     turn("assistant", "李白。"), turn("user", "Thanks!"), turn("assistant", "You're welcome.")],
    [turn("user", "Tell me many poems."), turn("assistant", long_reply)],
    [turn("user", "A question with no answer yet"), turn("assistant", "first answer"), turn("user", "and a trailing user turn")],
    [turn("user", "reply with nothing"), turn("assistant", "")],
    [turn("user", ""), turn("assistant", "")],
    [turn("user", "only a user turn")],
    [turn("system", "only a system turn")],
    [turn("user", "two users"), turn("user", "in a row"), turn("assistant", "ok")],
    [turn("user", "x"), turn("assistant", "y"), turn("system", "a late system turn"), turn("user", "z"), turn("assistant", "w")],
    [turn("assistant", "an assistant first"), turn("user", "then a user")],
    [turn("user", "extra keys are ignored", reasoning_content="..."), turn("assistant", "yes", functions=[])],
    [turn("user", "markers <|im_end|> in text"), turn("assistant", "<|im_start|>assistant\nfake <|endoftext|>")],
    [turn("system", "系统提示：用中文回答。"), turn("user", "天空为什么是蓝色的？"),
     turn("assistant", "因为瑞利散射：波长较短的蓝光更容易被大气散射。")],
    [turn("user", "a NUL \u0000 byte"), turn("assistant", "and\u0000another")],
]
rng = random.Random(11)
for _ in range(250):
    n = rng.choice([1, 2, 2, 2, 3, 4, 4, 6, 7])
    roles = (["system"] if rng.random() < 0.25 else []) + ["user" if i % 2 == 0 else "assistant" for i in range(n)]
    conv = [turn(r, "" if rng.random() < 0.05 else rng.choice(poems) if rng.random() < 0.6 else rng.choice(english)) for r in roles]
    hand.append(conv)
rng.shuffle(hand)

BAD_COMMON = ['{"conversations": [{"role": "user", "content": "unterminated', '[1, 2]', '{"text": "a pretraining line"}',
              '{"conversations": "hi"}', '{"conversations": []}', '{"conversations": [42]}',
              '{"conversations": [{"role": "user", "content": 5}]}', '{"conversations": [{"role": "user"}]}']
BAD_AS_WRITTEN = ['{"conversations": [{"role": "bot", "content": "hi"}]}', '{"conversations": [{"content": "no role"}]}']


def write_corpus(path, convs, bad, seed):
    """-> {"positional": [(line bytes, conv)], "as-written": ...}, {mode: [bad line numbers]}"""
    r = random.Random(seed)
    lines, kinds = [], []  # kinds: a conversation, or a bad line of both modes / of as-written only
    bad_queue = [(b, "both") for b in BAD_COMMON] + [(b, "as-written") for b in BAD_AS_WRITTEN] if bad else []
    step = max(1, len(convs) // (len(bad_queue) + 1))
    for i, conv in enumerate(convs):
        lines.append(json.dumps({"conversations": conv}, ensure_ascii=r.random() < 0.5).encode())
        kinds.append(conv)
        if bad_queue and i % step == step - 1:
            b, mode = bad_queue.pop(0)
            lines.append(b.encode())
            kinds.append(mode)
        if r.random() < 0.03:
            lines.append(b"  ")  # blank: ignored, not bad
            kinds.append(None)
    with open(path, "wb") as f:
        for i, line in enumerate(lines):
            f.write(line + (b"\r\n" if i == 3 else b"\n"))  # one CRLF line: its hash is of the line without it
    good = {"positional": [], "as-written": []}
    bad_at = {"positional": [], "as-written": []}
    for n, (line, kind) in enumerate(zip(lines, kinds), 1):
        for mode in good:
            if isinstance(kind, list) and (mode == "positional" or all(t["role"] in ("user", "assistant", "system") for t in kind)):
                good[mode].append((line, kind))
            elif kind == "both" or (kind == "as-written" and mode == "as-written"):
                bad_at[mode].append(n)
            elif kind == "as-written":  # a bad role is fine when roles are positional
                good[mode].append((line, json.loads(line)["conversations"]))
    return good, bad_at


small = os.path.join(work, "sft.jsonl")
convs, bad_at = write_corpus(small, hand, True, 3)
check(len(bad_at["as-written"]) <= 10, "at most 10 bad lines, all of them reported")

# tokenizer folders: one without a tokenizer_config.json, one with each accepted template
folders = {}
for name, tmpl in (("none", None), ("mmc", MMC_TEMPLATE), ("minimind2", MINIMIND2_TEMPLATE),
                   ("reformatted", MINIMIND2_REFORMATTED), ("newest", NEWEST_MINIMIND_TEMPLATE)):
    d = os.path.join(work, "tok_" + name)
    os.makedirs(d)
    shutil.copy(tok_path, os.path.join(d, "tokenizer.json"))
    if tmpl is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                       "chat_template": tmpl}, f, indent=2)
    folders[name] = d


def tokenizer_in(name):
    return os.path.join(folders[name], "tokenizer.json")


# ---- rows, masks and the split against the reference
cases = [  # label, roles, template folder (or --chat-template), style, seq, pack, val
    ("positional", "positional", "none", "mmc", 48, False, 0.3),
    ("positional seq 200", "positional", "none", "mmc", 200, False, 0.3),
    ("positional --pack", "positional", "none", "mmc", 48, True, 0.3),
    ("as-written", "as-written", "none", "mmc", 200, False, 0),
    ("as-written --pack", "as-written", "none", "mmc", 64, True, 0.2),
    ("mmc's template beside the tokenizer", "as-written", "mmc", "mmc", 200, False, 0),
    ("MiniMind2 beside the tokenizer", "positional", "minimind2", "minimind2", 200, False, 0.2),
    ("MiniMind2 --chat-template, as-written", "as-written", "--chat-template", "minimind2", 200, False, 0),
    ("MiniMind2 --chat-template, as-written, --pack", "as-written", "--chat-template", "minimind2", 48, True, 0.2),
    ("MiniMind2 reformatted", "as-written", "reformatted", "minimind2", 48, False, 0),
]
summaries = {}
for label, roles, folder, style, seq, pack, val in cases:
    out = os.path.join(work, re.sub(r"\W+", "_", label) + ".bin")
    args = [small, "--sft", "--seq", str(seq), "-o", out, "--quiet", "--roles", roles]
    if folder == "--chat-template":
        args += ["--tokenizer", tokenizer_in("none"), "--chat-template", os.path.join(folders["minimind2"], "tokenizer_config.json")]
    else:
        args += ["--tokenizer", tokenizer_in(folder)]
    args += ["--pack"] if pack else []
    args += ["--val", str(val)] if val else []
    p = run(*args)
    check(("MiniMind2's ChatML" if style == "minimind2" else "mmc's ChatML") in p.stdout, f"{label}: names its template: {p.stdout}")
    for n in bad_at[roles]:
        check(f"sft.jsonl:{n}:" in p.stderr, f"{label}: bad line {n} reported: {p.stderr}")
    check(f"{len(bad_at[roles])} bad lines skipped (the first: line {bad_at[roles][0]})" in p.stdout,
          f"{label}: bad lines counted in the summary: {p.stdout}")
    want = expected(convs[roles], roles, style, seq, pack, val)
    compare(label, out, want, seq)
    check(f"{len(convs[roles]) - sum(goes_to_val(val, l) for l, _ in convs[roles])} conversations" in p.stdout,
          f"{label}: conversations counted: {p.stdout}")
    summaries[label] = (out, want, seq)

# the bad-line messages
p = run(small, "--sft", "--tokenizer", tokenizer_in("none"), "--seq", "32", "-o", os.path.join(work, "msg.bin"), "--roles", "as-written")
for what in ("invalid JSON", "not a JSON object", "no \"conversations\" in the object", "\"conversations\" is not an array",
             "an empty conversation", "conversations[0] is not an object", "conversations[0]: \"content\" is not a string",
             "conversations[0]: no \"content\"", "unknown role \"bot\"", "conversations[0]: no \"role\""):
    check(what in p.stderr, f"bad line message '{what}': {p.stderr}")

# ---- mmc tokens: the masked share and the rows with nothing to learn
out, want, seq = summaries["positional"]
ids, mask = want["train"]
L = seq + 1
targets = [m for i, m in enumerate(mask) if i % L]
empty = sum(1 for r in range(len(ids) // L) if not any(mask[r * L + 1:(r + 1) * L]))
p = run(out, cmd="tokens")
share = 100.0 * (len(targets) - sum(targets)) / len(targets)
check(f"loss mask: {share:.1f}% of {len(targets)} targets masked out ({sum(targets)} count), {empty} rows with no counted target"
      in p.stdout, f"mmc tokens on a masked file: {p.stdout}")
check(empty > 0, "some row has no counted target (a conversation that is all prompt within seq)")

# ---- --strict: stops at the first bad line, leaves nothing behind
before = set(os.listdir(work))
p = run(small, "--sft", "--tokenizer", tokenizer_in("none"), "--seq", "32", "-o", os.path.join(work, "strict.bin"), "--val", "0.1",
        "--strict", ok=False)
check(p.returncode == 1, "--strict exits 1")
check(f"sft.jsonl:{bad_at['positional'][0]}:" in p.stderr and "--strict" in p.stderr, f"--strict names the first bad line: {p.stderr}")
check(set(os.listdir(work)) == before, f"--strict leaves no files: {set(os.listdir(work)) - before}")

# ---- the template check: others refused, naming what differs, and nothing written
def refused(tokenizer, *extra):
    before = set(os.listdir(work))
    p = run(small, "--sft", "--tokenizer", tokenizer, "--seq", "32", "-o", os.path.join(work, "refused.bin"), *extra, ok=False)
    check(p.returncode == 1 and set(os.listdir(work)) == before, f"refused template: exit 1, no files ({p.returncode})")
    return p.stderr


err = refused(tokenizer_in("newest"))
check("renders <think> reasoning blocks in assistant turns" in err and "renders tool definitions (tools)" in err
      and "tokenizer_config.json" in err, f"MiniMind's newest template refused, naming <think> and tools: {err}")
extra_turn_end = MMC_TEMPLATE.replace("'<|im_end|>\\n' -}}", "'<|im_end|>\\n\\n' -}}", 1)
# a newline after an expression tag is output (trim_blocks removes only the one after a block tag)
at = MINIMIND2_TEMPLATE.rindex("}}{%") + 2  # after the assistant turn
newline_out = MINIMIND2_TEMPLATE[:at] + "\n" + MINIMIND2_TEMPLATE[at:]
qa = [turn("user", "q"), turn("assistant", "a")]
check(jinja.from_string(newline_out).render(messages=qa) != compiled["minimind2"].render(messages=qa),
      "a newline after }} changes what MiniMind2's template renders")
newline_trimmed = MINIMIND2_TEMPLATE.replace("%}{{", "%}\n{{")  # ... and one after %} does not
others = {"uses other turn markers than <|im_start|>/<|im_end|>": MMC_TEMPLATE.replace("<|im_start|>", "<s>"),
          "has no default system turn": MMC_TEMPLATE.replace("You are a helpful assistant", "You are MiniMind"),
          f"differs from both known ChatML templates at byte {len(os.path.commonprefix([MMC_TEMPLATE, extra_turn_end]))} "
          "(nearest: mmc's)": extra_turn_end,
          f"differs from both known ChatML templates at byte {at} (nearest: MiniMind2's)": newline_out}
for i, (what, tmpl) in enumerate(others.items()):
    cfg = os.path.join(work, f"other{i}.json")
    with open(cfg, "w", encoding="utf-8") as f:
        json.dump({"chat_template": tmpl}, f)
    err = refused(tokenizer_in("none"), "--chat-template", cfg)
    check(what in err and f"other{i}.json" in err, f"template refused with '{what}': {err}")

cfg = os.path.join(work, "trimmed.json")
with open(cfg, "w", encoding="utf-8") as f:
    json.dump({"chat_template": newline_trimmed}, f)
p = run(small, "--sft", "--tokenizer", tokenizer_in("none"), "--chat-template", cfg, "--seq", "32", "-o", os.path.join(work, "trimmed.bin"),
        "--quiet", ok=False)
check(p.returncode == 0 and "MiniMind2's ChatML" in p.stdout, f"newlines that trim_blocks removes are no difference: {p.stderr}")

# ---- threads: a corpus of several 4 MB chunks gives the same bytes on 1, 2 and 3 threads
big = os.path.join(work, "big.jsonl")
r = random.Random(5)
with open(big, "w", encoding="utf-8") as f:
    for i in range(9000):
        conv = [turn("user" if k % 2 == 0 else "assistant", r.choice(poems)) for k in range(r.choice([2, 2, 4, 6]))]
        f.write(json.dumps({"conversations": conv}, ensure_ascii=False) + "\n")
        if i == 4000:
            f.write(json.dumps({"conversations": [turn("user", "长" * 2_000_000), turn("assistant", "好")]}, ensure_ascii=False) + "\n")
            f.write("{bad\n")
check(os.path.getsize(big) > 10_000_000, "the thread corpus spans several chunks")
for pack in ([], ["--pack"]):
    outputs = set()
    for threads in (1, 2, 3):
        out = os.path.join(work, f"threads{threads}.bin")
        run(big, "--sft", "--tokenizer", tokenizer_in("none"), "--seq", "128", "-o", out, "--val", "0.01", "--threads", str(threads),
            "--quiet", *pack)
        with open(out, "rb") as a, open(out[:-4] + ".val.bin", "rb") as b:
            outputs.add(a.read() + b.read())
    check(len(outputs) == 1, f"{'--pack ' if pack else ''}output is the same for 1, 2 and 3 threads")

# ---- version 1 files: plain mmc data still writes and reads them
v1 = os.path.join(work, "v1.bin")
run("--default", "--seq", "32", "-o", v1, "--quiet")
f1 = read_tokens(v1)
p = run(v1, cmd="tokens")
check(f1["version"] == 1 and f1["mask"] is None and "loss mask" not in p.stdout and "rows of 33" in p.stdout,
      f"plain mmc data writes version 1, and mmc tokens reads it: {p.stdout}")

# ---- damaged version 2 files are refused, naming the file and the byte
with open(summaries["positional"][0], "rb") as f:
    good = f.read()
count = struct.unpack_from("<Q", good, 16)[0]
at = struct.unpack_from("<Q", good, 72)[0]
damaged = {
    "truncated": (good[:-1], f"byte {at}: the mask plane"),
    "offset": (good[:72] + struct.pack("<Q", at + 8) + good[80:], "byte 72: mask plane at byte"),
    "flags": (good[:64] + struct.pack("<I", 3) + good[68:], "byte 64: unknown flags 0x2"),
    "version": (good[:8] + struct.pack("<I", 3) + good[12:], "byte 8: format version 3"),
}
for name, (data, what) in damaged.items():
    path = os.path.join(work, f"damaged_{name}.bin")
    with open(path, "wb") as f:
        f.write(data)
    p = run(path, cmd="tokens", ok=False)
    check(p.returncode != 0 and path in p.stderr and what in p.stderr, f"damaged ({name}) refused with '{what}': {p.stderr}")

if failures:
    sys.exit(f"FAIL mmc data --sft: {failures} checks failed")
print(f"ok mmc data --sft: {len(cases)} configurations row by row against MiniMind's SFTDataset, bad lines, --strict, "
      "templates, threads, mmc tokens, version 1 and damaged version 2 files")
