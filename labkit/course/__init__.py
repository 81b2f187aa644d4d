"""What only the notebooks need: the workspace, photo-like data, the ablation and its report, the panels, the
deliberately broken pieces, ragged data, clips, time limits, the torchrun and resume demos.

Import rule: labkit.course may use every layer, measure and diagnose; no other labkit package imports it.

The layers run core -> decode -> storage -> datasets -> samplers -> collate -> workers -> device ->
distributed, and each imports only those to its left. measure reads every layer; diagnose reads every layer
and measure; course and tools may use everything; nothing imports course or tools.
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "show_as_jpeg": "figures",
    "Workspace": "workspace",
    "WorkspaceError": "workspace",
    "prepare": "workspace",
    "course_workspace": "workspace",
    "data_root": "workspace",
    "shown_path": "workspace",
    "shown_text": "workspace",
    "learner_folder": "learner_modules",
    "load_learner_module": "learner_modules",
    "derived_folder": "workspace",
    "PhotoSpec": "synthetic_data",
    "ClipSpec": "synthetic_data",
    "make_photos": "synthetic_data",
    "make_clips": "synthetic_data",
    "make_hostile": "synthetic_data",
    "Settings": "ablation",
    "run_ablation": "ablation",
    "TimeLimitExceeded": "time_limits",
    "time_limit": "time_limits",
})
