#!/usr/bin/env python3
"""Trains a byte-level BPE with Hugging Face tokenizers the way MiniMind's
train_tokenizer.py does (ByteLevel pre-tokenizer without prefix space, ByteLevel decoder,
the three MiniMind special tokens, the full byte alphabet), on the "text" of each jsonl line.
usage: hf_train.py CORPUS.jsonl VOCAB OUT.json"""
import json
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

corpus, vocab, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
texts = []
with open(corpus, encoding="utf-8") as f:
    for line in f:
        if line.strip():
            texts.append(json.loads(line)["text"])
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=vocab,
    special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    show_progress=False,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
)
tok.train_from_iterator(texts, trainer=trainer)
tok.save(out)
