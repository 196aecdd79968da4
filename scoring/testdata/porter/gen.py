#!/usr/bin/python3
"""Regenerate words.txt.gz: every lower-case ASCII word of /usr/share/dict/words with the
stem NLTK's PorterStemmer (default mode, NLTK_EXTENSIONS; the stemmer rouge_score uses) gives.

Run once with Debian's python3 and python3-nltk (not a pyenv python):
    apt-get install -y python3-nltk wamerican
    /usr/bin/python3 scoring/testdata/porter/gen.py
The header records the NLTK and word-list versions so a change of either is visible.
"""
import gzip
import os
import re
import subprocess

import nltk
from nltk.stem.porter import PorterStemmer

WORDS = "/usr/share/dict/words"


def wordlist_version():
    try:
        pkg = subprocess.run(["dpkg", "-S", os.path.realpath(WORDS)], capture_output=True,
                             text=True).stdout.split(":")[0]
        ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                             text=True).stdout
        return f"{pkg} {ver}"
    except OSError:
        return "unknown"


def main():
    with open(WORDS, encoding="utf-8", errors="replace") as f:
        words = sorted({w.strip().lower() for w in f} - {""})
    words = [w for w in words if re.fullmatch(r"[a-z0-9]+", w)]
    stemmer = PorterStemmer()  # mode=NLTK_EXTENSIONS, as rouge_score constructs it
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "words.txt.gz")
    with gzip.GzipFile(out, "wb", mtime=0) as g:
        g.write(f"# nltk {nltk.__version__} PorterStemmer(mode=NLTK_EXTENSIONS)\n".encode())
        g.write(f"# words: {WORDS} ({wordlist_version()}), {len(words)} words\n".encode())
        g.write(b"# format: word<TAB>stem\n")
        for w in words:
            g.write(f"{w}\t{stemmer.stem(w)}\n".encode())


if __name__ == "__main__":
    main()
