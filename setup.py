"""What the wheel holds, beyond pyproject.toml (see README, Development: "What the wheel holds").

- The top-level ``templates/`` and ``static/`` folders of the repository become ``queuelog/templates`` and
  ``queuelog/static`` in the wheel (``queuelog.paths`` looks in both places).
- Each translation catalog ``messages.po`` is compiled into ``messages.mo`` by the build, and the ``.po``
  files stay out of the wheel: an installed queuelog reads its compiled catalogs as they are (a checkout
  parses its ``.po`` files in memory instead, see ``queuelog/i18n.py``).
"""

from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class build_py_with_catalogs(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs from the checkout, which reads its .po files in memory
        from babel.messages.mofile import write_mo
        from babel.messages.pofile import read_po

        for po in sorted((HERE / "queuelog" / "translations").glob("*/LC_MESSAGES/messages.po")):
            target = Path(self.build_lib) / po.relative_to(HERE).with_suffix(".mo")
            target.parent.mkdir(parents=True, exist_ok=True)
            with po.open("rb") as fh:
                catalog = read_po(fh, locale=po.parent.parent.name)
            with target.open("wb") as fh:
                write_mo(fh, catalog)


setup(
    packages=[
        *find_packages(include=["queuelog", "queuelog.*"]),
        "queuelog.templates",
        "queuelog.static",
    ],
    package_dir={"queuelog.templates": "templates", "queuelog.static": "static"},
    cmdclass={"build_py": build_py_with_catalogs},
)
