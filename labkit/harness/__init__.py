"""The harness every measurement stands on, shared by the `labkit` command, the benchmarks and the course: the data
folder (the kit's photo-like set or a user's ImageFolder, its packs beside it), the photo-like data itself, the
ablation and its report, the video-like clips run through a DataLoader and a staged pipeline, and the naive datasets
the measurements set beside labkit's. (Named apart from the repository's `benchmarks/` scripts, which use it.)
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Workspace": "workspace",
        "WorkspaceError": "workspace",
        "prepare": "workspace",
        "course_workspace": "workspace",
        "data_root": "workspace",
        "shown_path": "workspace",
        "shown_text": "workspace",
        "derived_folder": "workspace",
        "PhotoSpec": "synthetic_data",
        "ClipSpec": "synthetic_data",
        "make_photos": "synthetic_data",
        "make_clips": "synthetic_data",
        "make_hostile": "synthetic_data",
        "AblationSettings": "ablation",
        "run_ablation": "ablation",
    },
)
