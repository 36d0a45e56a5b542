"""The package's shape, read from its source: the import graph (imports inside functions too) with entry
points on top, util at the bottom and no import running upward; and the settings as the only reader of the
command line's flags."""
import ast
import os

from tests.helpers.suite import ROOT

PACKAGE = os.path.join(ROOT, 'training', 'deepspeech_training')
# The modules that name FLAGS: its definitions and config.settings_from_flags, the one reader.
FLAG_READERS = {'config', 'flags'}
# The command-line tools' starts: only these may import the command line (cli) or the entry module.
ENTRY_POINTS = {'entry', 'cli', 'train', 'evaluate.__main__'}


def module_files():
    """{module name in the package ('cli', 'data.samples', 'evaluate' for evaluate/__init__.py): path}"""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith('.py'):
                module = os.path.relpath(os.path.join(folder, name), PACKAGE)[:-3].replace(os.sep, '.')
                found[module[:-len('.__init__')] if module.endswith('.__init__') else module] = os.path.join(folder, name)
    found.pop('__init__', None)
    return found


def imported_modules(module, path, known):
    """The package's modules `module` imports: `from .x import y` names module x.y if there is one, else x."""
    base = module.split('.')[:-1] if not path.endswith('__init__.py') else module.split('.')
    for node in ast.walk(ast.parse(open(path, encoding='utf-8').read(), path)):
        if isinstance(node, ast.ImportFrom) and node.level:
            prefix = base[:len(base) - node.level + 1] + (node.module.split('.') if node.module else [])
            for alias in node.names:
                candidate = '.'.join(prefix + [alias.name])
                yield candidate if candidate in known else '.'.join(prefix)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or '']
            for name in names:
                if name.startswith('deepspeech_training.'):
                    yield name.split('.', 1)[1]


def import_graph():
    known = module_files()
    return {module: {t for t in imported_modules(module, path, known) if t in known and t != module}
            for module, path in known.items()}


def in_a_cycle(graph, start):
    """Whether `start` imports, directly or through others, itself."""
    todo, seen = list(graph[start]), set()
    while todo:
        module = todo.pop()
        if module == start:
            return True
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return False


def test_no_import_runs_upward():
    graph = import_graph()
    assert len(graph) > 40 and graph['cli'] >= {'config', 'inputs', 'decoding', 'trainer'}   # the check sees imports
    assert [m for m in graph if in_a_cycle(graph, m)] == []
    assert {m for m, targets in graph.items() if targets & {'cli', 'entry'}} <= ENTRY_POINTS
    assert {(m, t) for m, targets in graph.items() if m.startswith('util.') for t in targets
            if not t.startswith('util.')} == set()


def flag_readers(known):
    """The package's modules that name FLAGS (a read, or an import of it)."""
    for module, path in known.items():
        tree = ast.parse(open(path, encoding='utf-8').read(), path)
        if any(isinstance(node, ast.Name) and node.id == 'FLAGS' or isinstance(node, ast.alias) and node.name == 'FLAGS'
               for node in ast.walk(tree)):
            yield module


def test_only_the_settings_read_the_flags():
    assert set(flag_readers(module_files())) == FLAG_READERS
