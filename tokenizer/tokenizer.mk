# tokenizer/: `mmc tokenizer` and `mmc data` (included by the top Makefile).
# utf8proc (Unicode classes) is linked statically, as jansson (JSON) is by the top Makefile, so the same ./mmc
# starts on machines that lack them. The built-in corpus and tokenizer are embedded like
# the templates, so `mmc data --default` works from any folder.
TOKENIZER_LIBS := $(shell $(CC) -print-file-name=libutf8proc.a)
override CFLAGS += -Itokenizer
override LDLIBS += $(TOKENIZER_LIBS)
EMBED   += $(wildcard tokenizer/default/corpus.jsonl tokenizer/default/tokenizer.json)

# Encodes the same corpus with mmc and with Hugging Face tokenizers (same threads), MB/s.
bench-tokenizer: mmc
	bash bench/tokenizer_bench.sh

.PHONY: bench-tokenizer
