// Prints where a release pushes its images and chart: IMAGE_REPOSITORY of src/policy/names.ts,
// the registry prefix the chart and `serve` pull the add-on's images from by default. The release
// workflow reads it here, so that the address is written in one place.
import { IMAGE_REPOSITORY } from '../src/policy/names.ts';

process.stdout.write(`${IMAGE_REPOSITORY}\n`);
