"""Stand-ins for the Designer's computer-vision modules (azureml-designer-cv-modules), so that a job's command
written for Azure (`python -m azureml.designer.modules.computer_vision.preprocess.convert_to_image_directory.
convert_to_image_directory --input-path ... --output-path ...`) runs here unchanged, on mltrain's components.
Put on a script or command job's PYTHONPATH only when the real azureml packages are not installed."""
