from mltrain.cli import main

main()
