from mltrain.cli.main import entry

entry()
