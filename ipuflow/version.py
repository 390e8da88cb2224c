"""The ipuflow version, kept import-free so `ipuflow --version` stays fast."""

VERSION = "0.1.0"
