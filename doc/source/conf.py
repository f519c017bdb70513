# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The documentation: `tox -e docs` builds it, warnings as errors.

The source directory is doc/ (the guides stay where the README links them), this
directory holds the configuration and the pages made from the code: the
configuration reference (oslo.config's sphinxext) and the CLI reference (cliff's).
"""

from rp_reporter import version as rp_version

project = "rp_reporter"
copyright = "rp_reporter contributors"
release = rp_version.version_info.release_string()
version = rp_version.version_info.version_string()
extensions = [
    "myst_parser",
    "oslo_config.sphinxext",
    "cliff.sphinxext",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "source/index"
exclude_patterns = ["build"]
# The guides link each other's sections as GitHub names them.
myst_heading_anchors = 4
# A link is a page, a section or a file: looked up in the standard domain only
# (oslo.config's domain fails on a target that is not group.option).
myst_ref_domains = ["std"]
html_theme = "alabaster"
html_static_path = []


def _benchmark_outputs_are_orphans(app, doctree):
    """The benchmarks' tables (doc/benchmarks/*.md, as `tox -e bench` writes them) are
    pages the guides link, in no table of contents."""
    if app.env.docname.startswith("benchmarks/"):
        app.env.metadata[app.env.docname]["orphan"] = True


def setup(app):
    app.connect("doctree-read", _benchmark_outputs_are_orphans, priority=900)
