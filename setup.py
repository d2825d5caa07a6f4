"The nbdev 2 `setup.py`: every setting lives in `settings.ini`; edit it there, not here."
from configparser import ConfigParser
from pathlib import Path
import setuptools, shlex

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

cfg_keys = 'version description keywords author author_email'.split()
expected = cfg_keys + "lib_name user branch license status min_python audience language".split()
for o in expected: assert o in cfg, f"missing expected setting: {o}"
setup_cfg = {o:cfg[o] for o in cfg_keys}

# SPDX identifiers: License classifiers are deprecated by setuptools.
licenses = {
    'apache2': 'Apache-2.0',
    'mit': 'MIT',
    'gpl2': 'GPL-2.0-only',
    'gpl3': 'GPL-3.0-only',
    'bsd3': 'BSD-3-Clause',
}
statuses = [ '1 - Planning', '2 - Pre-Alpha', '3 - Alpha',
    '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive' ]
py_versions = '3.10 3.11 3.12 3.13'.split()

# Ranges, not pins (`torch>=2.4`): the Makefile installs the exact torch wheel it wants first.
requirements = shlex.split(cfg.get('requirements', ''))
if cfg.get('pip_requirements'): requirements += shlex.split(cfg.get('pip_requirements', ''))
min_python = cfg['min_python']
lic = licenses.get(cfg['license'].lower(), cfg['license'])
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
quant_requirements = shlex.split(cfg.get('quant_requirements', ''))
gguf_requirements = shlex.split(cfg.get('gguf_requirements', ''))

package_data = dict()
pkg_data = cfg.get('package_data', None)
if pkg_data: package_data[cfg['lib_name']] = pkg_data.split()
setup_cfg['package_data'] = package_data

readme = Path('README.md')
lib_path = cfg.get('lib_path', cfg['lib_name'])

setuptools.setup(
    name=cfg['lib_name'],
    license=lic,
    classifiers=[
        'Development Status :: ' + statuses[int(cfg['status'])],
        'Intended Audience :: ' + cfg['audience'].title(),
        'Natural Language :: ' + cfg['language'].title(),
    ]
    + [
        'Programming Language :: Python :: ' + o
        for o in py_versions[py_versions.index(min_python) :]
    ],
    url=cfg['git_url'],
    packages=setuptools.find_packages(include=[lib_path, lib_path + '.*']),
    include_package_data=True,
    install_requires=requirements,
    extras_require={'dev': dev_requirements, 'quant': quant_requirements, 'gguf': gguf_requirements},
    dependency_links=cfg.get('dep_links', '').split(),
    python_requires='>=' + cfg['min_python'],
    long_description=readme.read_text(encoding='utf-8') if readme.exists() else cfg['description'],
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={
        'console_scripts': cfg.get('console_scripts', '').split(),
        'nbdev': [f'{lib_path}={lib_path}._modidx:d'],
    },
    **setup_cfg,
)
