"""Seq2Vec encoders (Registrable): `bag_of_embeddings` (default), `cnn`, `lstm`."""

from ipuflow.models.encoders.seq2vec_encoder import Seq2VecEncoder
from ipuflow.models.encoders.bag_of_embeddings import BagOfEmbeddingsEncoder
from ipuflow.models.encoders.cnn import CnnEncoder
from ipuflow.models.encoders.lstm import LstmEncoder

__all__ = ["Seq2VecEncoder", "BagOfEmbeddingsEncoder", "CnnEncoder", "LstmEncoder"]
