"""The model archive: writing `model.tar.gz`, extracting and loading it, and the checks on what it holds."""
