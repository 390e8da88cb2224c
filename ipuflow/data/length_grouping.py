"""Ordering a shuffled epoch so that each combined batch holds instances of similar length, which
cuts the padding of per-batch padding further.

* ``bucket`` (AllenNLP's bucket batch sampler): instances are sorted by their lengths, each with
  noise of up to ±`padding_noise` of itself so that batches differ from epoch to epoch, cut into
  combined batches, and the batches are shuffled;
* ``group_by_length`` (the Hugging Face Trainer's LengthGroupedSampler): the shuffled instances are
  cut into megabatches of 50 combined batches (fewer for a small data set, so that there are at
  least 4), each sorted by length, longest first, and the batch holding the longest instance of
  all comes first (an out-of-memory error shows at once).

Both draw only from the epoch's generator, so an epoch's order depends on (seed, epoch) alone and a
resumed run sees the same batches.
"""

from __future__ import annotations

import numpy

MEGABATCH_BATCHES = 50
"""Combined batches per megabatch of ``group_by_length`` (the Trainer's ``mega_batch_mult`` cap)."""


def bucket_order(permutation: numpy.ndarray, lengths: numpy.ndarray, batch: int, padding_noise: float,
                 rng: numpy.random.Generator) -> numpy.ndarray:
    """`permutation` reordered into shuffled batches of `batch` instances of similar (noisy) length.

    `lengths` is [sorting keys, instances]: the first key sorts, the next ones break its ties. The
    instances of a last incomplete batch are the permutation's last ones (random, as without
    grouping) and stay last, where `drop_last` and `pad_on_batch_axis` treat them as before.
    """
    full = len(permutation) - len(permutation) % batch
    kept, rest = permutation[:full], permutation[full:]
    kept_lengths = lengths[:, kept].astype(numpy.float64)
    noisy = kept_lengths * (1.0 + rng.uniform(-padding_noise, padding_noise, size=kept_lengths.shape))
    # lexsort sorts by its last key first; it is stable, so exact ties keep the shuffled order.
    ordered = kept[numpy.lexsort(noisy[::-1])]
    batches = ordered.reshape(-1, batch)[rng.permutation(full // batch)]
    return numpy.concatenate([batches.reshape(-1), rest])


def megabatch_order(permutation: numpy.ndarray, lengths: numpy.ndarray, batch: int) -> numpy.ndarray:
    """`permutation` cut into megabatches, each sorted by length (longest first, ties in shuffled
    order), with the longest instance of all moved to the very first position."""
    batches_per_megabatch = max(1, min(len(permutation) // (batch * 4), MEGABATCH_BATCHES))
    size = batches_per_megabatch * batch
    megabatches = []
    for start in range(0, len(permutation), size):
        chunk = permutation[start:start + size]
        megabatches.append(chunk[numpy.lexsort(-lengths[::-1][:, chunk])])
    longest = int(numpy.argmax([lengths[0, megabatch[0]] for megabatch in megabatches]))
    first = megabatches[0]
    first[0], megabatches[longest][0] = megabatches[longest][0], first[0]
    return numpy.concatenate(megabatches)


LENGTH_GROUPINGS = ("bucket", "group_by_length")
"""The `length_grouping` choices."""


def grouped_order(grouping: str, permutation: numpy.ndarray, lengths: numpy.ndarray, batch: int,
                  padding_noise: float, rng: numpy.random.Generator) -> numpy.ndarray:
    """The epoch's order under `grouping` (one of LENGTH_GROUPINGS), from its shuffled `permutation`."""
    if grouping == "bucket":
        return bucket_order(permutation, lengths, batch, padding_noise, rng)
    return megabatch_order(permutation, lengths, batch)
