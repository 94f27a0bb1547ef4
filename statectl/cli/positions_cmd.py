"""`statectl positions`: where every source resumes (topic, partition, offset; file, position)."""

from __future__ import annotations

from statectl.cli.options import (
    AllowExternalFilesOption,
    JsonOption,
    OperatorOption,
    SavepointArgument,
    StorageOptionFlags,
    parse_storage_options,
)


def positions_command(
    path: SavepointArgument,
    json_output: JsonOption = False,
    operator: OperatorOption = None,
    storage_option: StorageOptionFlags = None,
    allow_external_files: AllowExternalFilesOption = False,
) -> None:
    """Show each source's splits and offsets, where the job resumes reading.

    FileSource, KafkaSource, NumberSequenceSource and the legacy FlinkKafkaConsumer are decoded;
    other sources are shown as unrecognised splits.

    Examples:

      statectl positions ./savepoint-1a2b3c-0123456789ab

      statectl positions ./sp --operator kafka-in --json | jq '.sources[0].splits'
    """
    import statectl
    from statectl.cli import positions_view
    from statectl.cli.console import print_json

    options = parse_storage_options(storage_option)
    savepoint = statectl.open(path, options, allow_external_files=allow_external_files)
    report = savepoint.positions(operator)
    if json_output:
        print_json(positions_view.positions_json(report))
    else:
        positions_view.print_positions(report)
