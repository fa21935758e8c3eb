"""What attacks, evaluation and the cache receive of whatever a mechanism's ``fit`` returned: a plain module.

A user's ``fit`` may hand back its model still wrapped for training — an Opacus ``GradSampleModule`` (or its
``_module``, which keeps Opacus' per-sample-gradient hooks: a later backward pass outside Opacus' step fails with
``IndexError: pop from empty list``), a ``torch.compile``d module or a ``DataParallel`` one. ``plain_module`` unwraps
every layer of these and returns a copy with no hooks and no per-sample gradient state, so every attack runs on the
same ordinary ``nn.Module`` and its state dict loads into ``Mechanism.build``'s architecture.
"""

from __future__ import annotations

import copy

from torch import nn

# module attributes that wrap the real model: DataParallel / DistributedDataParallel (.module), torch.compile's
# OptimizedModule (._orig_mod), Opacus' GradSampleModule and its variants (._module)
_WRAPPERS = {"DataParallel": "module", "DistributedDataParallel": "module", "OptimizedModule": "_orig_mod"}
_HOOKS = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)
_PARAM_STATE = ("grad_sample", "summed_grad", "_forward_counter", "_current_grad_sample", "ddp_hooks")
# what Opacus' GradSampleModule sets on the modules it wraps (its hook handles do not even pickle)
_MODULE_STATE = ("autograd_grad_sample_hooks", "activations", "max_batch_len", "ft_compute_sample_grad")


def unwrap(model: nn.Module) -> nn.Module:
    """The innermost module of ``model`` (itself if it wraps nothing), no copy.

    Through DataParallel (``.module``), ``torch.compile`` (``._orig_mod``) and Opacus' GradSampleModule (``._module``),
    in any nesting.
    """
    while True:
        name = type(model).__name__
        attr = _WRAPPERS.get(name) or ("_module" if "GradSampleModule" in name else None)
        if attr is None or not isinstance(getattr(model, attr, None), nn.Module):
            return model
        model = getattr(model, attr)


def plain_module(model: nn.Module) -> nn.Module:
    """A hook-free copy of ``unwrap(model)``.

    The same weights and buffers, no forward or backward hooks on any submodule, none of Opacus' state on a module (hook
    handles, stored activations) or a parameter (per-sample gradients), ``.grad`` cleared; it pickles (the executors
    send models between processes). The model given is not changed (its hooks are set aside during the copy and put
    back).

    Args:
        model: what a mechanism's ``fit`` returned as its model.

    Returns:
        The plain copy.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"a mechanism's fit must return an nn.Module as its model, got {type(model).__name__}")
    inner = unwrap(model)
    saved = {}
    for mod in inner.modules():  # set the hooks aside: their closures hold the wrapper (and would be copied with it)
        saved[mod] = {k: getattr(mod, k) for k in _HOOKS if hasattr(mod, k)}
        for k, hooks in saved[mod].items():
            setattr(mod, k, type(hooks)())
    try:
        plain = copy.deepcopy(inner)
    finally:
        for mod, hooks in saved.items():
            for k, v in hooks.items():
                setattr(mod, k, v)
    for mod in plain.modules():
        for k in _MODULE_STATE:
            if k in vars(mod):
                delattr(mod, k)
    for p in plain.parameters():
        p.grad = None
        for k in _PARAM_STATE:
            if hasattr(p, k):
                delattr(p, k)
    return plain
