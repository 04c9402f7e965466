"""Sphinx configuration: numpydoc docstrings, sphinx-gallery built from examples/, pydata theme.

``make -C docs html`` builds it with warnings as errors, in nitpicky mode: every reference to an
skmpt name must resolve. The heavy examples default to a quick run and take ``--full`` for the
one the "Reproducing the paper" page reports; the lighter ones run in the gallery with the
smaller arguments of ``SMALL_ARGS``. MathJax comes with the site (no network to read the math),
and ``python docs/check_pages.py`` reads every built page in headless Chromium.
"""

import os
import re
import sys
import warnings

import skmpt

sys.path.insert(0, os.path.abspath("."))

project = "skmpt"
copyright = "2026, skmpt developers"
release = version = skmpt.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # copies MathJax into _static/mathjax and points mathjax_path there
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

# The estimators' entries of the API reference come from the registry the common tests read:
# a new estimator registered in skmpt.estimators.ESTIMATORS appears here without an edit.
ESTIMATOR_LIST = "_estimators.rst"  # included by api.rst, not a page of its own


def _write_estimator_list():
    from skmpt.estimators import ESTIMATORS

    names = [*ESTIMATORS, "MLMCurveScorer"]
    lines = [".. currentmodule:: skmpt", "", ".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
    with open(ESTIMATOR_LIST, "w", encoding="utf-8") as file:
        file.write("\n".join(lines + [f"   {name}" for name in names]) + "\n")


_write_estimator_list()
# Every file with an autosummary directive; the class template lists inherited methods
# (fit, score, score_samples, transform, ...), which no autodoc default may override.
autosummary_generate = ["api.rst", ESTIMATOR_LIST]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
templates_path = ["_templates"]
exclude_patterns = ["_build", "generated/*.examples", ESTIMATOR_LIST]
default_role = "literal"
suppress_warnings = ["config.cache"]  # the gallery's reset_argv is a function

# Every reference to an skmpt name must resolve. Other libraries' names (numpy, torch,
# scikit-learn, transformers, ...) are written as references in numpydoc types but this build
# does not fetch their inventories (no network), so they render as plain text.
nitpicky = True
OTHER_LIBRARIES = "numpy|torch|sklearn|scipy|pandas|pooch|transformers|datasets|tokenizers|dask|ray|joblib|os|lm_eval"
nitpick_ignore_regex = [(r"py:.*", rf"({OTHER_LIBRARIES})(\..*)?")]

html_theme = "pydata_sphinx_theme"
html_title = f"skmpt {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # The top bar: the four sections; each section's pages are in the left sidebar.
    "header_links_before_dropdown": 4,
    "navigation_depth": 2,
}
html_static_path = ["_static"]
html_css_files = ["skmpt.css"]
html_js_files = ["skmpt.js"]

# Arguments each example runs with in the gallery: small sizes, same code paths.
SMALL_ARGS = {
    "plot_mpt_demo.py": ["--score-masks", "10"],
    "plot_convergence_in_masks.py": ["--n-samples", "50", "--repeats", "5", "--bias-masks", "2000"],
    "plot_training_curves.py": ["--n-inits", "2", "--max-epochs", "60"],
    "plot_mpt_curve_area.py": ["--n-samples", "300", "--max-epochs", "60"],
    "plot_grid_search.py": [
        "--n-samples", "300", "--components", "1", "2", "3", "4", "5", "--mask-rates", "uniform", "0.5",
        "--n-digits", "400", "--cv", "3", "--max-epochs", "60",
    ],
    "plot_grid_search_dask.py": ["--n-samples", "200"],
    "plot_imputation.py": ["--n-samples", "300", "--max-epochs", "15"],
    "plot_multiple_imputation.py": ["--replications", "5", "--n-imputations", "10", "--max-epochs", "40"],
    "plot_masked_diffusion.py": ["--max-steps", "100", "--n-train", "2000"],
}


def small_args(gallery_conf, script_vars):
    return SMALL_ARGS.get(os.path.basename(script_vars["src_file"]), [])


sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "backreferences_dir": "generated/backreferences",
    "doc_module": ("skmpt",),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/(plot_|mlm_)",
    "reset_argv": small_args,
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "abort_on_example_error": True,
    "run_stale_examples": False,
    # Its page of run times loads jQuery and DataTables from a CDN: the site must read offline.
    "write_computation_times": False,
}



def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods are documented by scikit-learn, and the
    methods the lm-eval model inherits from lm-eval's ``LM`` by lm-eval."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return True if (getattr(obj, "__module__", None) or "").startswith("lm_eval.") else None


SKLEARN_DOCS = "https://scikit-learn.org/stable/"


def _sklearn_link(match):
    """scikit-learn's own ``:ref:`` as a link to its site: an example of its gallery
    (``sphx_glr_auto_examples_miscellaneous_plot_set_output.py``) to that example's page, any
    other label to its user guide."""
    text, label = match.group(1).strip(), (match.group(2) or match.group(1)).strip()
    if label.startswith("sphx_glr_auto_examples_"):
        folder, _, name = label.removeprefix("sphx_glr_auto_examples_").removesuffix(".py").partition("_plot_")
        return f"`scikit-learn's example <{SKLEARN_DOCS}auto_examples/{folder}/plot_{name}.html>`__"
    return f"`{text} of scikit-learn <{SKLEARN_DOCS}user_guide.html>`__"


def _sklearn_references_as_text(app, what, name, obj, options, lines):
    """Inherited scikit-learn methods (``set_output``, ``get_metadata_routing``) are listed with
    their docstrings, whose ``:ref:`` labels live in scikit-learn's documentation (this build
    fetches no inventory): each becomes a plain link to scikit-learn's site."""
    if (getattr(obj, "__module__", None) or "").startswith("sklearn"):
        reference = re.compile(r":ref:`([^`<]*?)\s*(?:<([^>]*)>)?`")
        lines[:] = [reference.sub(_sklearn_link, line) for line in lines]


def _registry_docstrings(app, what, name, obj, options, lines):
    """A registry that a package re-exports (``skmpt.testing.MODELS``) takes its ``#:`` comment
    from the module of the package that defines it, not the docstring of ``dict`` or ``tuple``."""
    if what != "data":
        return
    import importlib
    import pkgutil

    from sphinx.pycode import ModuleAnalyzer

    package_name, _, attribute = name.rpartition(".")
    package = importlib.import_module(package_name)
    for module in pkgutil.walk_packages(getattr(package, "__path__", []), package_name + "."):
        comment = ModuleAnalyzer.for_module(module.name).find_attr_docs().get(("", attribute))
        if comment and getattr(importlib.import_module(module.name), attribute, None) is obj:
            lines[:] = [*comment, ""]
            return
    if lines and lines[0] in (type(obj).__doc__ or ""):
        lines[:] = []


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
    app.connect("autodoc-process-docstring", _sklearn_references_as_text)
    app.connect("autodoc-process-docstring", _registry_docstrings, priority=100)  # before numpydoc


# Convergence warnings of the deliberately short gallery runs are expected.
warnings.filterwarnings("ignore", category=UserWarning, message=".*ConvergenceWarning.*")
