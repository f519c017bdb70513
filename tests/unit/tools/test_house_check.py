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

"""tools/house_check.py: the rules `tox -e pep8` keeps fail where they should."""

from tools import house_check

HEADER = "# Licensed under the Apache License, Version 2.0\n" + house_check.LICENCE_END + "\n"


def tree(tmp_path, module_lines=10, function_lines=5, readme="# x\n", doc="How it works.\n",
         header=HEADER):
    (tmp_path / "rp_reporter").mkdir()
    body = "".join(f"    x = {i}\n" for i in range(function_lines - 1))
    code = f"def f():\n{body}" + "".join(f"# {i}\n" for i in range(module_lines - function_lines))
    (tmp_path / "rp_reporter" / "mod.py").write_text(header + code)
    (tmp_path / "doc" / "source" / "admin").mkdir(parents=True)
    (tmp_path / "doc" / "source" / "admin" / "guide.md").write_text(doc)
    (tmp_path / "README.md").write_text(readme)
    return tmp_path


def test_a_clean_house_passes(tmp_path):
    assert house_check.main(tree(tmp_path)) == 0


def test_a_module_over_400_lines_fails(tmp_path, capsys):
    assert house_check.main(tree(tmp_path, module_lines=401)) == 1
    assert "rp_reporter/mod.py:1: 401 lines" in capsys.readouterr().out


def test_a_module_without_the_licence_header_fails(tmp_path, capsys):
    root = tree(tmp_path, header="")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text(HEADER)
    assert house_check.main(root) == 1
    assert capsys.readouterr().out == ("rp_reporter/mod.py:1: no licence header (the "
                                       "Apache-2.0 one)\n")


def test_the_licence_header_does_not_count_as_the_modules_size(tmp_path):
    root = tree(tmp_path, module_lines=400, header="")
    module = root / "rp_reporter" / "mod.py"
    module.write_text("# Licensed under the Apache License, Version 2.0\n" + "#\n" * 9
                      + house_check.LICENCE_END + "\n" + module.read_text())
    assert house_check.main(root) == 0


def test_a_function_over_80_lines_fails(tmp_path, capsys):
    assert house_check.main(tree(tmp_path, module_lines=100, function_lines=81)) == 1
    assert "f() is 81 lines" in capsys.readouterr().out


def test_a_long_readme_and_the_words_of_a_documents_making_fail(tmp_path, capsys):
    root = tree(tmp_path, readme="line\n" * 150,
                doc="As issue 12 asked, run 3 (fixed in 4c46f5d) was faster.\n")
    assert house_check.main(root) == 1
    out = capsys.readouterr().out
    assert "README.md:1: 150 lines" in out
    for words in ("issue 12", "run 3", "fixed in", "4c46f5d"):
        assert repr(words) in out


def test_a_document_path_that_names_nothing_fails(tmp_path, capsys):
    """A guide moved, and an option's help (so every generated sample) still named it.
    (The paths are put together here: this file is among those the check reads.)"""
    doc = "doc" + "/"
    root = tree(tmp_path, doc=f"See {doc}source/admin/guide.md and {doc}gone.md.\n")
    (root / "etc").mkdir()
    (root / "etc" / "x.sample").write_text(
        f"# ({doc}old-guide.md, tenancy)\n# Documentation=file:///usr/share/{doc}x/a.md\n")
    assert house_check.main(root) == 1
    assert capsys.readouterr().out == (
        f"etc/x.sample:1: names {doc}old-guide.md, which does not exist\n"
        f"{doc}source/admin/guide.md:1: names {doc}gone.md, which does not exist\n")
