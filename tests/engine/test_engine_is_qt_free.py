"""The engine never imports Qt nor the app: import every module with them blocked (the static
check of every import statement is tests/engine/test_import_contract.py)."""
import subprocess
import sys

from support import REPO

CODE = r"""
import importlib, pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph', 'superqt', 'qtpy', 'app',
                                  'elmo_explorer'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
import elmo_engine
names = [m.name for m in pkgutil.walk_packages(elmo_engine.__path__, 'elmo_engine.')
         if not m.name.endswith('__main__')]  # running a program is not importing it
for n in names:
    importlib.import_module(n)
print(len(names))
"""


def test_engine_imports_without_qt():
    r = subprocess.run([sys.executable, "-c", CODE], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) >= 10
