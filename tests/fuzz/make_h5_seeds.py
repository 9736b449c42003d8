#!/usr/bin/python3
# Writes the h5py-made seeds of the fuzz_h5 corpus (tests/fuzz/corpus/h5/): small format v1 files, valid and
# damaged one way each, so that the fuzzer starts from images that reach every check of validate_dataset.
# The seeds made by `ragtrain gen` (gen_*.h5) come from tests/fuzz/README.md's commands. Needs h5py and numpy.
# usage: /usr/bin/python3 tests/fuzz/make_h5_seeds.py tests/fuzz/corpus/h5
import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def write(name, task="classification", classes=3, outputs=2, offsets=(0, 2, 5), features=None, labels=None,
          attrs=None, drop=(), fixed_strings=False, compress=False):
    n = len(offsets) - 1
    if features is None:
        features = np.arange(offsets[-1] * 2, dtype=np.float32).reshape(offsets[-1], 2)
    if labels is None:
        labels = (np.arange(n, dtype=np.int32) % 2 if task == "classification"
                  else np.ones((n, outputs), dtype=np.float32))
    a = {"format": "ragtrain-ragged", "version": 1, "task": task, "source": "fuzz seed"}
    if task == "classification":
        a["num_classes"] = classes
        a["class_names"] = [f"c{i}" for i in range(classes)]
    else:
        a["num_outputs"] = outputs
    a.update(attrs or {})
    with h5py.File(os.path.join(out, name), "w", libver="earliest") as f:
        for k, v in a.items():
            if k in drop:
                continue
            if fixed_strings and isinstance(v, str):
                f.attrs.create(k, np.bytes_(v))
            elif fixed_strings and isinstance(v, list):
                f.attrs.create(k, np.array([s.encode() for s in v], dtype="S8"))
            else:
                f.attrs[k] = v
        kw = {"chunks": True, "compression": "gzip", "shuffle": True} if compress else {}
        for k, v in (("features", features), ("offsets", np.asarray(offsets, dtype=np.int64)), ("labels", labels)):
            if "/" + k not in drop:
                f.create_dataset(k, data=v, **kw)


write("h5py_valid_classification.h5")
write("h5py_valid_regression.h5", task="regression")
write("h5py_fixed_strings.h5", fixed_strings=True)
write("h5py_chunked_gzip.h5", compress=True)
write("h5py_unlabeled.h5", drop=("task", "num_classes", "class_names", "/labels"))
write("unlabeled_with_num_classes.h5", drop=("task", "class_names", "/labels"))
write("task_without_labels.h5", drop=("/labels",))
write("bad_format.h5", attrs={"format": "other"})
write("bad_version_type.h5", attrs={"version": 1.5})
write("bad_task.h5", attrs={"task": ["classification", "regression"]})
write("bad_num_classes.h5", attrs={"num_classes": 1})
write("bad_class_names.h5", attrs={"class_names": [1, 2, 3]})
write("regression_with_classes.h5", task="regression", attrs={"num_classes": 3})
write("missing_offsets.h5", drop=("/offsets",))
write("bad_offsets.h5", offsets=(0, 3, 3))
write("features_int.h5", features=np.ones((5, 2), dtype=np.int32))
write("features_1d.h5", features=np.ones(5, dtype=np.float32))
write("labels_wrong_count.h5", labels=np.zeros(5, dtype=np.int32))
write("offsets_int32.h5", attrs={}, offsets=(0, 2, 5))
with h5py.File(os.path.join(out, "offsets_int32.h5"), "a") as f:
    del f["offsets"]
    f["offsets"] = np.array([0, 2, 5], dtype=np.int32)
with h5py.File(os.path.join(out, "offsets_group.h5"), "w", libver="earliest") as f:
    f.attrs["format"] = "ragtrain-ragged"
    f.attrs["version"] = 1
    f.attrs["task"] = "classification"
    f.attrs["num_classes"] = 2
    f["features"] = np.zeros((3, 1), dtype=np.float32)
    f.create_group("offsets")
